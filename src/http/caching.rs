//! Validators for crawlers' conditional GETs, derived from the page summaries
//! without reading a row.
//!
//! A page's summary lastmod moves forward, at microsecond precision, on every
//! change to its rows, so it identifies the page's content; with the settings
//! that shape the bytes and the representation (gzip file, plain XML, or a
//! wire encoding of it) it makes a strong `ETag`. `If-None-Match` wins over
//! `If-Modified-Since`, whose one-second precision cannot see two changes
//! within a second; Googlebot prefers the ETag.

use std::cell::RefCell;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use time::OffsetDateTime;

/// The validators of one representation of a document.
#[derive(Debug, Clone)]
pub(super) struct Validators {
    etag: HeaderValue,
    /// Whole seconds since the epoch (what an HTTP date can say), when the
    /// document has a change time.
    last_modified: Option<SystemTime>,
}

impl Validators {
    /// `version` identifies the content (e.g. a change time in
    /// microseconds), `variant` the settings and representation: its parts
    /// are joined by `-`.
    pub(super) fn new(
        version: u128,
        variant: &[&str],
        changed: Option<OffsetDateTime>,
    ) -> Validators {
        Validators {
            etag: entity_tag(version, variant),
            last_modified: changed.map(|changed| {
                SystemTime::UNIX_EPOCH
                    + Duration::from_secs(u64::try_from(changed.unix_timestamp()).unwrap_or(0))
            }),
        }
    }

    /// Whether the request's conditions say the client's copy is current.
    pub(super) fn client_is_current(&self, request: &HeaderMap) -> bool {
        if let Some(if_none_match) = request.get(header::IF_NONE_MATCH) {
            // What a crawler sends back is most often the tag itself.
            if if_none_match.as_bytes() == self.etag.as_bytes() {
                return true;
            }
            let (Ok(tags), Ok(ours)) = (if_none_match.to_str(), self.etag.to_str()) else {
                return false;
            };
            return tags
                .split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.trim_start_matches("W/") == ours);
        }
        request
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| httpdate::parse_http_date(value).ok())
            .zip(self.last_modified)
            .is_some_and(|(since, modified)| modified <= since)
    }

    /// Adds `ETag`, `Last-Modified` and `Cache-Control` to a response.
    pub(super) fn apply(self, headers: &mut HeaderMap, cache_control: &HeaderValue) {
        headers.insert(header::ETAG, self.etag);
        if let Some(modified) = self.last_modified {
            headers.insert(header::LAST_MODIFIED, http_date(modified));
        }
        headers.insert(header::CACHE_CONTROL, cache_control.clone());
    }

    /// The `304 Not Modified` answer: validators, no body.
    pub(super) fn not_modified(
        self,
        cache_control: &HeaderValue,
        vary: Option<HeaderValue>,
    ) -> Response {
        let mut response = StatusCode::NOT_MODIFIED.into_response();
        self.apply(response.headers_mut(), cache_control);
        if let Some(vary) = vary {
            response.headers_mut().insert(header::VARY, vary);
        }
        response
    }
}

/// `"{version:x}-{variant…}"`, written out by hand: every `304` builds one,
/// and `format!` with its hex formatting of a `u128` was a twentieth of a
/// `304`'s time.
fn entity_tag(version: u128, variant: &[&str]) -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (128 - version.leading_zeros()).div_ceil(4).max(1) as usize;
    // Exactly as long as the tag: `Bytes` takes a full vector as it is,
    // where one with room to spare costs it another allocation.
    let len = 2 + digits + variant.iter().map(|part| part.len() + 1).sum::<usize>();
    let mut tag = Vec::with_capacity(len);
    tag.push(b'"');
    for digit in (0..digits).rev() {
        tag.push(HEX[((version >> (digit * 4)) & 0xf) as usize]);
    }
    for part in variant {
        tag.push(b'-');
        tag.extend_from_slice(part.as_bytes());
    }
    tag.push(b'"');
    HeaderValue::from_maybe_shared(bytes::Bytes::from(tag))
        .expect("hex digits and slugs make a valid header")
}

/// `at` as an HTTP date. Each thread keeps the last it wrote: the `304`s of
/// one page all carry the same, and formatting it was a twentieth of one.
fn http_date(at: SystemTime) -> HeaderValue {
    thread_local! {
        static LAST: RefCell<Option<(SystemTime, HeaderValue)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((written, value)) if *written == at => value.clone(),
        _ => {
            let value = HeaderValue::try_from(httpdate::fmt_http_date(at))
                .expect("an HTTP date is a valid header");
            *last = Some((at, value.clone()));
            value
        }
    })
}

/// `Cache-Control` of sitemap documents kept `max_age` seconds.
pub(crate) fn cache_control(max_age: u32) -> HeaderValue {
    HeaderValue::from_str(&format!("public, max-age={max_age}"))
        .expect("digits make a valid header")
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn request(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().expect("header"));
        headers
    }

    #[test]
    fn if_none_match_compares_tags_and_wins_over_dates() {
        let v = Validators::new(0xabc, &["gz"], Some(datetime!(2026-11-21 10:00:00.5 UTC)));
        assert!(v.client_is_current(&request(header::IF_NONE_MATCH, "\"abc-gz\"")));
        assert!(v.client_is_current(&request(header::IF_NONE_MATCH, "\"x\", W/\"abc-gz\"")));
        assert!(v.client_is_current(&request(header::IF_NONE_MATCH, "*")));
        assert!(!v.client_is_current(&request(header::IF_NONE_MATCH, "\"abc-xml\"")));
        let mut both = request(header::IF_NONE_MATCH, "\"old\"");
        both.insert(
            header::IF_MODIFIED_SINCE,
            "Sat, 21 Nov 2026 10:00:00 GMT".parse().expect("date"),
        );
        assert!(
            !v.client_is_current(&both),
            "a stale tag is not rescued by a date"
        );
    }

    #[test]
    fn entity_tags_are_hex_then_the_variant() {
        let tag = |version, variant: &[&str]| entity_tag(version, variant).as_bytes().to_vec();
        assert_eq!(tag(0, &["gz"]), b"\"0-gz\"");
        assert_eq!(tag(0xabc, &["f00d", "xml"]), b"\"abc-f00d-xml\"");
        assert_eq!(tag(u128::MAX, &[]), b"\"ffffffffffffffffffffffffffffffff\"");
        for version in [1_795_000_000_123_456_u128, (1 << 64) + 0xab, 1 << 127] {
            assert_eq!(
                tag(version, &["x"]),
                format!("\"{version:x}-x\"").into_bytes()
            );
        }
    }

    #[test]
    fn last_modified_follows_each_response_s_own_date() {
        let cache_control = cache_control(60);
        for (changed, date) in [
            (
                datetime!(2026-11-21 10:00:00.5 UTC),
                "Sat, 21 Nov 2026 10:00:00 GMT",
            ),
            (
                datetime!(2026-11-21 10:00:00.9 UTC),
                "Sat, 21 Nov 2026 10:00:00 GMT",
            ),
            (
                datetime!(2026-11-22 08:30:01 UTC),
                "Sun, 22 Nov 2026 08:30:01 GMT",
            ),
            (
                datetime!(2026-11-21 10:00:00 UTC),
                "Sat, 21 Nov 2026 10:00:00 GMT",
            ),
        ] {
            let mut headers = HeaderMap::new();
            Validators::new(1, &["gz"], Some(changed)).apply(&mut headers, &cache_control);
            assert_eq!(headers[header::LAST_MODIFIED], date);
        }
    }

    #[test]
    fn if_modified_since_has_second_precision() {
        let v = Validators::new(1, &["gz"], Some(datetime!(2026-11-21 10:00:00.5 UTC)));
        assert!(v.client_is_current(&request(
            header::IF_MODIFIED_SINCE,
            "Sat, 21 Nov 2026 10:00:00 GMT"
        )));
        assert!(!v.client_is_current(&request(
            header::IF_MODIFIED_SINCE,
            "Sat, 21 Nov 2026 09:59:59 GMT"
        )));
        assert!(!v.client_is_current(&request(header::IF_MODIFIED_SINCE, "yesterday")));
        assert!(!v.client_is_current(&HeaderMap::new()));
    }
}
