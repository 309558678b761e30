//! Telling search engines what changed: [`indexnow`] pushes each changed URL
//! from the change feed, [`submit`] sends a site's index URL by GET to
//! engines that still take one (the 2008 guide's "submitting via an HTTP
//! request").
//!
//! Both run in the background beside the fold and never touch a request
//! or a write: a dead endpoint only grows a backlog, which the metrics show
//! and the feed's retention bounds. Replicas take turns through row locks
//! (see `store::push`), so one sends at a time.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, header};

use crate::store;

pub(crate) mod indexnow;
pub(crate) mod submit;

/// The background senders a service runs, each `None` when not configured.
#[derive(Debug, Clone, Default)]
pub struct Announcers {
    pub(crate) indexnow: Option<indexnow::Pusher>,
    pub(crate) submitter: Option<submit::Submitter>,
}

impl Announcers {
    /// `sitemapd submit`: sends the IndexNow backlog now, without the batch
    /// delay, and submits every index to every template; with `dry_run`,
    /// only says what would be sent. Returns what it did, a line each, and
    /// whether everything sent was taken.
    pub async fn submit_now(
        &self,
        dry_run: bool,
    ) -> Result<(Vec<String>, bool), Arc<store::Error>> {
        let mut lines = Vec::new();
        let mut all_taken = true;
        if let Some(pusher) = &self.indexnow {
            for target in &pusher.keyed().await? {
                if dry_run {
                    lines.extend(pusher.preview(target).await?);
                    continue;
                }
                let (last, accepted) = pusher.flush(target).await?;
                let outcome = match last {
                    indexnow::Sent::Nothing => "the backlog is empty",
                    indexnow::Sent::Busy => "another replica is sending its backlog",
                    indexnow::Sent::Deferred => {
                        all_taken = false;
                        "the endpoint asked to wait or did not answer: the rest stays in the backlog"
                    }
                    indexnow::Sent::Done { .. } => "sent",
                };
                lines.push(format!(
                    "IndexNow, site {}: {accepted} URLs accepted; {outcome}",
                    target.site
                ));
            }
        }
        if let Some(submitter) = &self.submitter {
            if dry_run {
                lines.extend(
                    submitter
                        .planned()
                        .await?
                        .into_iter()
                        .map(|url| format!("GET {url}")),
                );
            } else {
                for sent in submitter.submit_all().await? {
                    all_taken &= sent.status == Some(200);
                    let status = sent
                        .status
                        .map_or_else(|| "no answer".to_owned(), |s| s.to_string());
                    lines.push(format!("GET {} -> {status}", sent.url));
                }
            }
        }
        if lines.is_empty() {
            lines.push(
                "nothing to send: no site has an indexnow_key, and submit_urls is empty".to_owned(),
            );
        }
        Ok((lines, all_taken))
    }
}

/// How long one request to an engine may take, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `Retry-After` honoured: a longer one is read as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Bytes of an engine's answer kept for the log.
const BODY_IN_LOG: usize = 1024;

/// The HTTP client both use: rustls with the Mozilla roots built in, so a
/// container image needs no CA bundle.
pub(crate) fn client() -> reqwest::Client {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls_config(roots))
        .user_agent(concat!("sitemapd/", env!("CARGO_PKG_VERSION")))
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .expect("a client with a preconfigured rustls backend builds")
}

/// rustls over ring, trusting `roots`, for a client's preconfigured
/// backend.
pub(crate) fn tls_config(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// What `Retry-After` asks for (seconds, or an HTTP date), capped.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    let wait = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(SystemTime::now())
            .unwrap_or_default(),
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The start of an answer's body, on one line, for a log field.
async fn body_for_log(response: reqwest::Response) -> String {
    let body = response.text().await.unwrap_or_default();
    let mut end = body.len().min(BODY_IN_LOG);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date_and_is_capped() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("999999"));
        assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
        let soon = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from_str(&soon).expect("date"),
        );
        let wait = retry_after(&headers).expect("a date");
        assert!(
            (Duration::from_secs(100)..=Duration::from_secs(120)).contains(&wait),
            "{wait:?}"
        );
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }
}
