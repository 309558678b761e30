//! A site's URL audit settings: whether its listed URLs are fetched from
//! the live site, from where, how fast, as whom, how often again, and
//! which findings leave a URL out.

use std::time::Duration;

use url::Url;

/// The findings `audit_leave_out` may name.
pub const LEAVE_OUT_FINDINGS: [&str; 5] = [
    "redirect",
    "not-found",
    "gone",
    "noindex",
    "canonical-elsewhere",
];

/// The fastest a site may be audited.
pub(crate) const MAX_REQUESTS_PER_SECOND: f64 = 10_000.0;

/// The shortest time before an unchanged URL is checked again.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// How a site's URLs are audited (when `audit` is on).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditSettings {
    pub enabled: bool,
    /// `scheme://host[:port]` requests go to instead of the site's own
    /// origin (an internal address), if any.
    pub origin: Option<String>,
    pub requests_per_second: f64,
    /// The User-Agent of its requests, if not the default.
    pub user_agent: Option<String>,
    /// How long an unchanged URL's check holds.
    pub interval: Duration,
    /// The findings that leave a URL out of the sitemaps.
    pub leave_out: Vec<String>,
}

// Settings are checked before they are kept: the rate is finite.
impl Eq for AuditSettings {}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: false,
            origin: None,
            requests_per_second: 2.0,
            user_agent: None,
            interval: Duration::from_secs(30 * 24 * 3600),
            leave_out: Vec::new(),
        }
    }
}

/// Why `origin` cannot be fetched through, if so.
pub(crate) fn origin_problem(origin: &str) -> Option<String> {
    let expected = "an origin to fetch through: http(s)://host[:port], nothing after";
    let Ok(url) = Url::parse(origin) else {
        return Some(expected.to_owned());
    };
    let bare = matches!(url.scheme(), "http" | "https")
        && url.has_host()
        && url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && !origin.trim_end_matches('/').ends_with(':');
    (!bare).then(|| expected.to_owned())
}

/// `origin` as stored: `scheme://host[:port]`, lower case.
pub(crate) fn normal_origin(origin: &str) -> String {
    Url::parse(origin).map_or_else(
        |_| origin.to_owned(),
        |url| url.origin().ascii_serialization(),
    )
}

/// Why a User-Agent cannot be sent, if so.
pub(crate) fn user_agent_problem(agent: &str) -> Option<String> {
    let printable =
        !agent.is_empty() && agent.len() <= 256 && agent.bytes().all(|b| (0x20..0x7f).contains(&b));
    (!printable).then(|| "1 to 256 printable ASCII characters".to_owned())
}

/// Why a rate cannot be kept, if so.
pub(crate) fn rate_problem(rate: f64) -> Option<String> {
    (!(rate > 0.0 && rate <= MAX_REQUESTS_PER_SECOND)).then(|| {
        format!("a number of requests a second above 0, at most {MAX_REQUESTS_PER_SECOND}")
    })
}

/// The interval `text` gives ("30d", "12h"), or why not.
pub(crate) fn parse_interval(text: &str) -> Result<Duration, String> {
    humantime_serde::re::humantime::parse_duration(text)
        .ok()
        .filter(|interval| *interval >= MIN_INTERVAL)
        .ok_or_else(|| "a duration of a minute or more, such as \"30d\" or \"12h\"".to_owned())
}

/// The first finding of `leave_out` that is not one, if any.
pub(crate) fn leave_out_problem(leave_out: &[String]) -> Option<String> {
    leave_out
        .iter()
        .find(|finding| !LEAVE_OUT_FINDINGS.contains(&finding.as_str()))
        .map(|finding| {
            format!(
                "findings among {}, not {finding:?}",
                LEAVE_OUT_FINDINGS.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_with_their_rule() {
        assert_eq!(origin_problem("http://10.0.0.5:8080"), None);
        assert_eq!(origin_problem("https://Origin.Example/"), None);
        assert_eq!(
            normal_origin("https://Origin.Example/"),
            "https://origin.example"
        );
        for bad in [
            "10.0.0.5",
            "ftp://x.example",
            "https://x.example/shop",
            "https://u:p@x.example",
            "https://x.example?a",
        ] {
            assert!(origin_problem(bad).is_some(), "{bad}");
        }
        assert!(user_agent_problem("sitemapd-audit (+https://ops.example)").is_none());
        assert!(user_agent_problem("bad\nagent").is_some());
        assert!(rate_problem(0.5).is_none() && rate_problem(0.0).is_some());
        assert!(rate_problem(f64::NAN).is_some() && rate_problem(10_001.0).is_some());
        assert_eq!(parse_interval("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert!(parse_interval("10s").is_err() && parse_interval("soon").is_err());
        assert!(leave_out_problem(&["gone".into(), "noindex".into()]).is_none());
        assert!(leave_out_problem(&["ok".into()]).is_some_and(|p| p.contains("\"ok\"")));
    }
}
