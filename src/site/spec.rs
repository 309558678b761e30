//! What a site is written as, and the one check every writer of a site goes
//! through: the configuration file, the write API and `sitemapd sites`.
//! The schema's CHECK constraints hold the same rules for plain SQL.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::audit::{self, AuditSettings};
use super::robots::{self, RobotsCheck};
use super::{IndexFormat, Site};
use crate::sitemap::name::{SLUG_RULE, is_section_slug};

/// The most robots.txt text a site may have: 500 KiB, all that Google reads
/// of one.
pub(crate) const MAX_ROBOTS_BYTES: usize = 512_000;

/// A site's settings, as written: the body of `PUT /api/v1/sites/{name}`.
/// A setting left out takes its default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SiteSpec {
    /// The public base URL every URL printed for the site is built from:
    /// http or https, with a host, no credentials, query or fragment.
    #[schema(example = "https://shop.example.com/")]
    pub base_url: String,
    /// The operator's robots.txt for the site's host (at most 512,000
    /// bytes); its `Sitemap:` lines are appended when served.
    #[serde(default)]
    pub robots_txt: Option<String>,
    /// Whether the site's index also lists the pages of the sites under its
    /// base URL, on its scheme and host (default false).
    #[serde(default)]
    pub include_subfolder_sites: Option<bool>,
    /// The site's IndexNow key: 8 to 128 of a-z, A-Z, 0-9 and -.
    #[serde(default)]
    pub indexnow_key: Option<String>,
    /// Which name of the index robots.txt announces (default: the
    /// service's `index_format`).
    #[serde(default)]
    pub index_format: Option<IndexFormat>,
    /// Serve an index split in several files as an index of them (default:
    /// the service's `nested_index`).
    #[serde(default)]
    pub nested_index: Option<bool>,
    /// What becomes of a loc its host's robots.txt disallows for one of
    /// `robots_check_agents`: left out (`leave-out`, the default), listed
    /// and reported (`report`), or not checked (`off`).
    #[serde(default)]
    pub robots_check: Option<RobotsCheck>,
    /// The user agents each loc is checked for (default `["*",
    /// "googlebot", "bingbot"]`).
    #[serde(default)]
    #[schema(example = json!(["*", "googlebot", "bingbot"]))]
    pub robots_check_agents: Option<Vec<String>>,
    /// Fetch its listed URLs from the live site and report what they
    /// answer (default false).
    #[serde(default)]
    pub audit: Option<bool>,
    /// Where the audit fetches from instead of the site's own origin, as
    /// `scheme://host[:port]` (an internal address, say).
    #[serde(default)]
    pub audit_origin: Option<String>,
    /// Requests a second at most (default 2).
    #[serde(default)]
    pub audit_requests_per_second: Option<f64>,
    /// The audit's User-Agent (default `sitemapd-audit/VERSION`).
    #[serde(default)]
    pub audit_user_agent: Option<String>,
    /// How long an unchanged URL's check holds before it is fetched
    /// again (default `"30d"`).
    #[serde(default)]
    #[schema(example = "30d")]
    pub audit_interval: Option<String>,
    /// Findings that leave a URL out of the sitemaps until a later check
    /// passes, among `redirect`, `not-found`, `gone`, `noindex` and
    /// `canonical-elsewhere` (default none: report only).
    #[serde(default)]
    pub audit_leave_out: Option<Vec<String>>,
}

/// What a site that does not say takes: the service's `index_format` and
/// `nested_index`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SiteDefaults {
    pub index_format: IndexFormat,
    pub nested_index: bool,
}

/// A rule a site's setting breaks: the field, its value (cut short), and
/// what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} = {value:?}: expected {expected}")]
pub struct SiteError {
    pub field: &'static str,
    pub value: String,
    pub expected: String,
}

/// A value as errors quote it: at most 200 characters.
fn quoted(value: &str) -> String {
    match value.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}

impl SiteSpec {
    /// The site `name` these settings describe, or every rule they break.
    pub fn site(&self, name: &str, defaults: SiteDefaults) -> Result<Site, Vec<SiteError>> {
        let mut errors = Vec::new();
        let mut error = |field, value: &str, expected: String| {
            errors.push(SiteError {
                field,
                value: quoted(value),
                expected,
            });
        };
        if !is_section_slug(name) {
            error("name", name, format!("a slug: {SLUG_RULE}"));
        }
        let site = Site::new(name, &self.base_url, self.robots_txt.clone())
            .map_err(|expected| error("base_url", &self.base_url, expected))
            .ok();
        if let Some(robots) = &self.robots_txt {
            if robots.len() > MAX_ROBOTS_BYTES {
                error(
                    "robots_txt",
                    robots,
                    format!(
                        "at most {MAX_ROBOTS_BYTES} bytes, all that Google reads (this is {})",
                        robots.len()
                    ),
                );
            } else if let Some(problem) = robots::robots_txt_problem(robots) {
                error("robots_txt", robots, problem);
            }
        }
        if let Some(agents) = &self.robots_check_agents
            && let Some(problem) = robots::agents_problem(agents)
        {
            error("robots_check_agents", &format!("{agents:?}"), problem);
        }
        let mut audit_settings = AuditSettings {
            enabled: self.audit.unwrap_or(false),
            ..AuditSettings::default()
        };
        if let Some(origin) = &self.audit_origin {
            match audit::origin_problem(origin) {
                Some(problem) => error("audit_origin", origin, problem),
                None => audit_settings.origin = Some(audit::normal_origin(origin)),
            }
        }
        if let Some(rate) = self.audit_requests_per_second {
            match audit::rate_problem(rate) {
                Some(problem) => error("audit_requests_per_second", &rate.to_string(), problem),
                None => audit_settings.requests_per_second = rate,
            }
        }
        if let Some(agent) = &self.audit_user_agent {
            match audit::user_agent_problem(agent) {
                Some(problem) => error("audit_user_agent", agent, problem),
                None => audit_settings.user_agent = Some(agent.clone()),
            }
        }
        if let Some(interval) = &self.audit_interval {
            match audit::parse_interval(interval) {
                Ok(parsed) => audit_settings.interval = parsed,
                Err(problem) => error("audit_interval", interval, problem),
            }
        }
        if let Some(leave_out) = &self.audit_leave_out {
            match audit::leave_out_problem(leave_out) {
                Some(problem) => error("audit_leave_out", &format!("{leave_out:?}"), problem),
                None => audit_settings.leave_out.clone_from(leave_out),
            }
        }
        if let Some(key) = &self.indexnow_key
            && !is_indexnow_key(key)
        {
            error(
                "indexnow_key",
                key,
                "8 to 128 characters, each a-z, A-Z, 0-9 or -".into(),
            );
        }
        match site {
            Some(mut site) if errors.is_empty() => {
                site.include_subfolder_sites = self.include_subfolder_sites.unwrap_or(false);
                site.indexnow_key = self.indexnow_key.clone();
                site.index_format = self.index_format.unwrap_or(defaults.index_format);
                site.nested_index = self.nested_index.unwrap_or(defaults.nested_index);
                site.robots_check = self.robots_check.unwrap_or_default();
                if let Some(agents) = &self.robots_check_agents {
                    site.robots_check_agents.clone_from(agents);
                }
                site.audit = audit_settings;
                Ok(site)
            }
            _ => Err(errors),
        }
    }

    /// The settings `site` was made of, defaults written out.
    pub fn of(site: &Site) -> SiteSpec {
        SiteSpec {
            base_url: site.base_url.clone(),
            robots_txt: site.robots_txt.clone(),
            include_subfolder_sites: Some(site.include_subfolder_sites),
            indexnow_key: site.indexnow_key.clone(),
            index_format: Some(site.index_format),
            nested_index: Some(site.nested_index),
            robots_check: Some(site.robots_check),
            robots_check_agents: Some(site.robots_check_agents.clone()),
            audit: Some(site.audit.enabled),
            audit_origin: site.audit.origin.clone(),
            audit_requests_per_second: Some(site.audit.requests_per_second),
            audit_user_agent: site.audit.user_agent.clone(),
            audit_interval: Some(
                humantime_serde::re::humantime::format_duration(site.audit.interval).to_string(),
            ),
            audit_leave_out: Some(site.audit.leave_out.clone()),
        }
    }
}

/// Whether `key` is a valid IndexNow key: 8 to 128 of `a-z A-Z 0-9 -`.
fn is_indexnow_key(key: &str) -> bool {
    (8..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(base_url: &str) -> SiteSpec {
        SiteSpec {
            base_url: base_url.into(),
            ..SiteSpec::default()
        }
    }

    fn fields(result: Result<Site, Vec<SiteError>>) -> Vec<&'static str> {
        result
            .expect_err("invalid")
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn every_broken_rule_is_named_by_its_field() {
        let defaults = SiteDefaults::default();
        let bad = SiteSpec {
            base_url: "ftp://example.com/".into(),
            robots_txt: Some("x".repeat(MAX_ROBOTS_BYTES + 1)),
            indexnow_key: Some("short".into()),
            ..SiteSpec::default()
        };
        assert_eq!(
            fields(bad.site("Shop", defaults)),
            ["name", "base_url", "robots_txt", "indexnow_key"]
        );
        for base_url in [
            "example.com",
            "https://user:pw@example.com/",
            "https://example.com/?a=1",
            "https://example.com/#top",
            "javascript:alert(1)",
            "file:///etc/passwd",
        ] {
            assert_eq!(
                fields(spec(base_url).site("shop", defaults)),
                ["base_url"],
                "{base_url}"
            );
        }
        let long = format!("https://example.com/{}/", "a".repeat(2000));
        let error = spec(&long).site("shop", defaults).expect_err("too long");
        assert!(error[0].expected.contains("2000 bytes"), "{error:?}");
        assert!(error[0].value.ends_with('…') && error[0].value.len() < 210);
    }

    #[test]
    fn defaults_fill_what_a_spec_leaves_out() {
        let defaults = SiteDefaults {
            index_format: IndexFormat::XmlGz,
            nested_index: true,
        };
        let site = spec("https://Shop.Example.com/en")
            .site("shop", defaults)
            .expect("valid");
        assert_eq!(site.base_url, "https://shop.example.com/en/");
        assert_eq!(
            (site.index_format, site.nested_index),
            (IndexFormat::XmlGz, true)
        );
        let written = SiteSpec::of(&site);
        assert_eq!(written.site("shop", SiteDefaults::default()), Ok(site));
    }
}
