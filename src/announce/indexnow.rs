//! IndexNow: every URL added, changed or removed, POSTed from the change
//! feed in commit order to the engines that share IndexNow.
//!
//! Each site with a key has a cursor in the feed, started at the first
//! change the pusher sees after the site has its key (never before the
//! service started: what was committed before is not back-filled). The
//! pusher looks at the feed's new entries each round, one range however
//! many sites there are, and follows only the sites they name until their
//! backlog is sent. Its first change waits
//! `indexnow_batch_delay_ms` for more to join it (10,000 waiting go at
//! once), then the backlog goes out in POSTs of at most 10,000 URLs, one
//! host each. 200 and 202 move the cursor on. 429, 5xx and no answer retry
//! the same batch after `Retry-After`, or after a doubling wait. Any other
//! answer is logged with its body and counted, and the batch is dropped:
//! sending it again would get the same answer.
//!
//! The cursor moves in the transaction that holds the site's turn, right
//! after the answer, so a restart resumes after the last batch accepted.
//! Only a crash between an accepted answer and that commit can send a batch
//! twice.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use time::OffsetDateTime;
use tokio::time::Instant;

use std::collections::BTreeMap;

use crate::metrics::Metrics;
use crate::site::{Directory, Site};
use crate::store::{self, ChangeBatch, Store};

/// The protocol's limit of URLs in one POST.
pub(crate) const MAX_URLS_PER_POST: usize = 10_000;

/// The first wait after an unanswered or throttled POST; each further one
/// doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How often the whole backlog is counted for the metrics; in between, only
/// up to a batch's worth, which is all that sending needs.
const FULL_COUNT_EVERY: Duration = Duration::from_secs(15);

/// How often the backlog is looked at, at most and at least.
const POLL_MIN: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(1);

const JSON: HeaderValue = HeaderValue::from_static("application/json; charset=utf-8");

/// A site that pushes its changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) site: String,
    /// The base URL's `host[:port]`: every URL of the site is on it.
    pub(crate) host: String,
    pub(crate) key: String,
    /// Where the key file is, when it is not at the host's root. IndexNow
    /// then takes only URLs under that file's folder.
    pub(crate) key_location: Option<String>,
    /// Where the engine fetches the key file to check it.
    pub(crate) key_file: String,
}

impl Target {
    /// `site`'s push, if it has a key. Its key file is at the host's root
    /// when sitemapd answers there: the site's base URL is the root, or
    /// another configured site's is and the proxy passes paths through.
    pub(crate) fn of(site: &Site, sites: &[&Site], proxy_strips_prefix: bool) -> Option<Target> {
        let key = site.indexnow_key.clone()?;
        let root_answered = site.path_prefix == "/"
            || (!proxy_strips_prefix
                && sites
                    .iter()
                    .any(|other| other.origin == site.origin && other.path_prefix == "/"));
        let key_location = (!root_answered).then(|| format!("{}{key}.txt", site.base_url));
        Some(Target {
            site: site.name.clone(),
            host: site
                .origin
                .split_once("://")
                .map_or(site.host.as_str(), |(_, authority)| authority)
                .to_owned(),
            key_file: key_location
                .clone()
                .unwrap_or_else(|| format!("{}/{key}.txt", site.origin)),
            key_location,
            key,
        })
    }
}

/// The body of one POST, as the protocol names its fields.
#[derive(Debug, Serialize)]
pub(crate) struct Submission<'a> {
    pub(crate) host: &'a str,
    pub(crate) key: &'a str,
    #[serde(rename = "keyLocation", skip_serializing_if = "Option::is_none")]
    pub(crate) key_location: Option<&'a str>,
    #[serde(rename = "urlList")]
    pub(crate) url_list: &'a [String],
}

impl<'a> Submission<'a> {
    pub(crate) fn of(target: &'a Target, urls: &'a [String]) -> Submission<'a> {
        Submission {
            host: &target.host,
            key: &target.key,
            key_location: target.key_location.as_deref(),
            url_list: urls,
        }
    }
}

/// The pusher: every site with a key, one endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Pusher {
    pub(crate) store: Store,
    pub(crate) client: reqwest::Client,
    pub(crate) endpoint: String,
    pub(crate) batch_delay: Duration,
    /// Where each site's key is, and its key file.
    pub(crate) sites: Arc<Directory>,
    pub(crate) metrics: Arc<Metrics>,
}

/// Where one site's push stands between two looks at its backlog.
#[derive(Debug, Default)]
struct Progress {
    /// When this replica first saw the changes now waiting.
    waiting_since: Option<Instant>,
    /// A batch to send again, and not before when.
    retry: Option<Retry>,
    /// Tries of that batch so far.
    failures: u32,
    /// When the whole backlog was last counted.
    counted_at: Option<Instant>,
}

impl Progress {
    /// A batch went for good: no retry pending, the backlog to count anew.
    fn settled(&mut self) {
        self.retry = None;
        self.failures = 0;
        self.counted_at = None;
    }
}

#[derive(Debug, Clone, Copy)]
struct Retry {
    through: i64,
    at: Instant,
}

/// What became of one try to send a site's next batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Nothing was waiting.
    Nothing,
    /// Another replica has the turn.
    Busy,
    /// The endpoint took the batch (`accepted` URLs), or refused it for
    /// good (none); `full` when it held as many changes as a batch may, so
    /// more may be waiting.
    Done { full: bool, accepted: usize },
    /// The batch waits to be sent again.
    Deferred,
}

/// Where the pusher's look at the feed stands.
#[derive(Debug, Clone, Copy)]
struct Scan {
    /// The feed's end when the pusher started: a site's cursor never
    /// starts before it.
    floor: i64,
    /// The last entry looked at.
    through: i64,
}

impl Pusher {
    /// The push of the site `name`, if it exists and has a key.
    async fn target(&self, name: &str) -> Result<Option<Target>, Arc<store::Error>> {
        let Some(site) = self.sites.named(name).await? else {
            return Ok(None);
        };
        let beside = self.sites.beside(&site).await?;
        let sites: Vec<&Site> = beside.all().iter().map(AsRef::as_ref).collect();
        Ok(Target::of(&site, &sites, self.sites.proxy_strips_prefix()))
    }

    /// Where to start looking: from the least cursor of the sites with a
    /// key, and never starting one before the feed's end now.
    async fn begin_scan(&self) -> Result<Scan, store::Error> {
        let floor = self.store.feed_end().await?;
        let through = self
            .store
            .indexnow_delivered_through()
            .await?
            .map_or(floor, |least| least.min(floor));
        Ok(Scan { floor, through })
    }

    /// The sites with a key that changed since the last look, each with a
    /// cursor: one started now begins where the look began (or at the
    /// pusher's start), so the changes that revealed it are sent.
    async fn look(&self, scan: &mut Scan) -> Result<Vec<String>, store::Error> {
        let end = self.store.feed_end().await?;
        if end <= scan.through {
            return Ok(Vec::new());
        }
        let changed = self.store.keyed_changes(scan.through, end).await?;
        for change in changed.iter().filter(|change| !change.started) {
            self.store
                .start_indexnow(&change.site, scan.through.max(scan.floor))
                .await?;
        }
        scan.through = end;
        Ok(changed.into_iter().map(|change| change.site).collect())
    }

    /// Pushes until aborted.
    pub(crate) async fn run(self) {
        let poll = self.batch_delay.clamp(POLL_MIN, POLL_MAX);
        let mut scan = loop {
            match self.begin_scan().await {
                Ok(scan) => break scan,
                Err(error) => {
                    tracing::warn!(%error, "IndexNow: could not read the change feed");
                    tokio::time::sleep(poll).await;
                }
            }
        };
        let mut following: BTreeMap<String, Progress> = BTreeMap::new();
        loop {
            match self.look(&mut scan).await {
                Ok(changed) => {
                    for site in changed {
                        following.entry(site).or_default();
                    }
                }
                Err(error) => tracing::warn!(%error, "IndexNow: could not read the change feed"),
            }
            let mut done = Vec::new();
            for (site, progress) in &mut following {
                let stepped = match self.target(site).await {
                    Ok(Some(target)) => self.step(&target, progress).await.map_err(Arc::new),
                    Ok(None) => Ok(true),
                    Err(error) => Err(error),
                };
                match stepped {
                    Ok(true) => done.push(site.clone()),
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(site = %site, %error, "IndexNow: could not read the change feed");
                    }
                }
            }
            for site in done {
                following.remove(&site);
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Starts the cursor of every site with a key that has none, at the
    /// feed's end.
    pub(crate) async fn start_cursors(&self) -> Result<(), store::Error> {
        self.store.start_indexnow_cursors().await
    }

    /// Every site with a key, its cursor started: for `sitemapd submit`.
    pub(crate) async fn keyed(&self) -> Result<Vec<Target>, Arc<store::Error>> {
        self.start_cursors().await?;
        let mut targets = Vec::new();
        for site in self.store.keyed_sites().await? {
            if let Some(target) = self.target(&site).await? {
                targets.push(target);
            }
        }
        Ok(targets)
    }

    /// Looks at `target`'s backlog and sends it when its wait is over;
    /// whether nothing is left to follow.
    async fn step(&self, target: &Target, progress: &mut Progress) -> Result<bool, store::Error> {
        let count_all = progress
            .counted_at
            .is_none_or(|at| at.elapsed() >= FULL_COUNT_EVERY);
        let cap = i64::try_from(MAX_URLS_PER_POST).unwrap_or(i64::MAX);
        let backlog = self
            .store
            .indexnow_backlog(&target.site, (!count_all).then_some(cap))
            .await?;
        if count_all {
            progress.counted_at = Some(Instant::now());
        }
        let age = backlog.oldest.map_or(Duration::ZERO, |oldest| {
            (OffsetDateTime::now_utc() - oldest)
                .try_into()
                .unwrap_or_default()
        });
        let exact = count_all || backlog.changes < cap;
        self.metrics
            .indexnow_backlog(&target.site, exact.then_some(backlog.changes), age);
        if backlog.changes == 0 {
            progress.waiting_since = None;
            return Ok(progress.retry.is_none());
        }
        if progress
            .retry
            .is_some_and(|retry| Instant::now() < retry.at)
        {
            return Ok(false);
        }
        let waiting_since = *progress.waiting_since.get_or_insert_with(Instant::now);
        let batch_full =
            usize::try_from(backlog.changes).unwrap_or(usize::MAX) >= MAX_URLS_PER_POST;
        if progress.retry.is_none() && !batch_full && waiting_since.elapsed() < self.batch_delay {
            return Ok(false);
        }
        loop {
            match self.send_next(target, progress).await? {
                Sent::Done { full: true, .. } => {}
                Sent::Done { full: false, .. } | Sent::Nothing => {
                    progress.waiting_since = None;
                    return Ok(false);
                }
                Sent::Busy | Sent::Deferred => return Ok(false),
            }
        }
    }

    /// Sends everything waiting now, without the batch delay, until it is
    /// sent, another replica has the turn, or the endpoint asks to wait.
    /// Returns the last outcome and the URLs the endpoint took.
    pub(crate) async fn flush(&self, target: &Target) -> Result<(Sent, usize), store::Error> {
        let mut progress = Progress::default();
        let mut total = 0;
        loop {
            match self.send_next(target, &mut progress).await? {
                Sent::Done { accepted, .. } => total += accepted,
                other => return Ok((other, total)),
            }
        }
    }

    /// What `target` would send next, as the request: for `submit --dry-run`.
    pub(crate) async fn preview(&self, target: &Target) -> Result<Vec<String>, store::Error> {
        let batch = self
            .store
            .peek_indexnow(&target.site, MAX_URLS_PER_POST)
            .await?;
        Ok(match batch.filter(|batch| batch.entries > 0) {
            None => vec![format!("IndexNow, site {}: nothing waiting", target.site)],
            Some(batch) => vec![
                format!("POST {} ({} URLs)", self.endpoint, batch.urls.len()),
                serde_json::to_string_pretty(&Submission::of(target, &batch.urls))
                    .expect("a submission serialises"),
            ],
        })
    }

    /// Takes `target`'s turn and sends its next batch (or the one to retry).
    async fn send_next(
        &self,
        target: &Target,
        progress: &mut Progress,
    ) -> Result<Sent, store::Error> {
        let Some(mut claim) = self.store.claim_indexnow(&target.site).await? else {
            return Ok(Sent::Busy);
        };
        let through = progress.retry.map(|retry| retry.through);
        let batch = claim.batch(MAX_URLS_PER_POST, through).await?;
        if batch.entries == 0 {
            progress.retry = None;
            return Ok(Sent::Nothing);
        }
        let full = batch.entries == MAX_URLS_PER_POST;
        match self.post(target, &batch).await {
            Answer::Accepted => {
                claim.advance(batch.through).await?;
                self.metrics
                    .indexnow_accepted(&target.site, batch.urls.len());
                tracing::info!(site = %target.site, urls = batch.urls.len(), "IndexNow: batch accepted");
                progress.settled();
                Ok(Sent::Done {
                    full,
                    accepted: batch.urls.len(),
                })
            }
            Answer::Refused { status, body } => {
                claim.advance(batch.through).await?;
                let hint = if status == StatusCode::FORBIDDEN {
                    format!(
                        "; the key was not accepted: check that {} answers the key",
                        target.key_file
                    )
                } else {
                    String::new()
                };
                tracing::warn!(
                    site = %target.site,
                    status = status.as_u16(),
                    urls = batch.urls.len(),
                    %body,
                    "IndexNow refused a batch, which is dropped{hint}"
                );
                progress.settled();
                Ok(Sent::Done { full, accepted: 0 })
            }
            Answer::Later { asked } => {
                drop(claim);
                let wait = asked.unwrap_or_else(|| {
                    FIRST_BACKOFF
                        .saturating_mul(1 << progress.failures.min(16))
                        .min(MAX_BACKOFF)
                });
                progress.failures += 1;
                progress.retry = Some(Retry {
                    through: batch.through,
                    at: Instant::now() + wait,
                });
                Ok(Sent::Deferred)
            }
        }
    }

    /// POSTs `batch` and sorts the answer.
    async fn post(&self, target: &Target, batch: &ChangeBatch) -> Answer {
        let body = serde_json::to_vec(&Submission::of(target, &batch.urls))
            .expect("a submission serialises");
        self.metrics.indexnow_sent(&target.site, batch.urls.len());
        let response = self
            .client
            .post(&self.endpoint)
            .header(header::CONTENT_TYPE, JSON)
            .body(body)
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                self.metrics.indexnow_refused(&target.site, None);
                tracing::warn!(site = %target.site, endpoint = %self.endpoint, error = %error, "IndexNow: no answer; the batch will be sent again");
                return Answer::Later { asked: None };
            }
        };
        let status = response.status();
        if status == StatusCode::OK || status == StatusCode::ACCEPTED {
            return Answer::Accepted;
        }
        self.metrics
            .indexnow_refused(&target.site, Some(status.as_u16()));
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let asked = super::retry_after(response.headers());
            tracing::warn!(
                site = %target.site,
                status = status.as_u16(),
                retry_after_seconds = asked.map(|wait| wait.as_secs()),
                "IndexNow asked to wait; the batch will be sent again"
            );
            return Answer::Later { asked };
        }
        Answer::Refused {
            status,
            body: super::body_for_log(response).await,
        }
    }
}

/// An endpoint's answer, as the pusher acts on it.
enum Answer {
    Accepted,
    /// Refused for good: drop the batch.
    Refused {
        status: StatusCode,
        body: String,
    },
    /// Throttled, failing or silent: send the batch again, after `asked`
    /// when the endpoint said how long.
    Later {
        asked: Option<Duration>,
    },
}

#[cfg(test)]
mod tests {
    use super::Target;
    use crate::site::Site;

    fn site(name: &str, base_url: &str, key: Option<&str>) -> Site {
        let mut site = Site::new(name, base_url, None).expect("a valid base URL");
        site.indexnow_key = key.map(str::to_owned);
        site
    }

    #[test]
    fn the_key_file_is_at_the_root_only_where_sitemapd_answers_there() {
        let root = site("main", "https://www.example.com/", Some("rootkey0"));
        let shop = site("shop", "https://www.example.com/shop/", Some("shopkey0"));
        let blog = site(
            "blog",
            "https://blog.example.org:8443/news/",
            Some("blogkey0"),
        );
        let sites = [&root, &shop, &blog];

        let target = Target::of(&root, &sites, false).expect("a key");
        assert_eq!(target.host, "www.example.com");
        assert_eq!(target.key_location, None);
        assert_eq!(target.key_file, "https://www.example.com/rootkey0.txt");
        // The root site's host answers /shopkey0.txt too.
        assert_eq!(
            Target::of(&shop, &sites, false)
                .expect("a key")
                .key_location,
            None
        );
        // A proxy that strips /shop/ sends sitemapd nothing at the root.
        assert_eq!(
            Target::of(&shop, &sites, true)
                .expect("a key")
                .key_location
                .as_deref(),
            Some("https://www.example.com/shop/shopkey0.txt")
        );
        let blog_target = Target::of(&blog, &sites, false).expect("a key");
        assert_eq!(blog_target.host, "blog.example.org:8443");
        assert_eq!(
            blog_target.key_location.as_deref(),
            Some("https://blog.example.org:8443/news/blogkey0.txt")
        );
        assert_eq!(
            Target::of(&site("x", "https://x.example/", None), &sites, false),
            None
        );
    }
}
