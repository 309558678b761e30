//! Configuration: `config/default.toml` (built in), an optional file, then
//! `SITEMAPD_*` environment variables (and `DATABASE_URL`,
//! `DATABASE_READ_URL`), later layers
//! winning.
//!
//! Everything is checked once, at start: a bad value stops the process with a
//! message naming the key, the value and what is expected, rather than
//! surfacing as a wrong sitemap later.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;
use url::Url;

use crate::site::{IndexFormat, RobotsCheck, Site, SiteDefaults, SiteSpec};
use crate::sitemap::{self, name::SLUG_RULE, name::is_section_slug};
use crate::tokens::Tokens;

const DEFAULTS: &str = include_str!("../config/default.toml");

/// A configuration problem, naming the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value of the wrong type, an unknown key, an unreadable file.
    #[error("configuration: {0}")]
    Load(Box<figment::Error>),
    #[error("configuration key `{key}` = {value:?}: expected {expected}")]
    Invalid {
        key: String,
        value: String,
        expected: String,
    },
}

/// The service's settings, as loaded and validated.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub database_url: DatabaseUrl,
    /// A read replica for the sitemaps' reads, if any.
    #[serde(default)]
    pub database_read_url: Option<DatabaseUrl>,
    pub(crate) db_max_connections: u32,
    pub db_acquire_timeout_ms: u64,
    /// How far behind the primary the standby may replay and still be read.
    pub read_max_lag_ms: u64,
    /// How long a read made for serving waits for the database's next answer.
    pub db_read_timeout_ms: u64,
    pub listen: SocketAddr,
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    /// Whether `/metrics` is also served on `listen`.
    pub metrics_public: bool,
    pub(crate) site: String,
    pub base_url: String,
    /// Whether the primary site's index also lists its subfolder sites'.
    pub include_subfolder_sites: bool,
    /// The primary site's robots.txt, as text or from a file (not both).
    #[serde(default)]
    pub robots_txt: Option<String>,
    #[serde(default)]
    pub(crate) robots_file: Option<PathBuf>,
    /// What becomes of the primary site's locs its robots.txt disallows.
    #[serde(default)]
    pub robots_check: Option<RobotsCheck>,
    /// The user agents the primary site's locs are checked for.
    #[serde(default)]
    pub robots_check_agents: Option<Vec<String>>,
    /// The primary site's URL audit (see [`SiteSettings`]).
    #[serde(default)]
    pub audit: Option<bool>,
    #[serde(default)]
    pub audit_origin: Option<String>,
    #[serde(default)]
    pub audit_requests_per_second: Option<f64>,
    #[serde(default)]
    pub audit_user_agent: Option<String>,
    #[serde(default)]
    pub audit_interval: Option<String>,
    #[serde(default)]
    pub audit_leave_out: Option<Vec<String>>,
    /// More sites, by name (the rows' `site` column).
    #[serde(default)]
    pub sites: BTreeMap<String, SiteSettings>,
    pub strict_host: bool,
    pub proxy_strips_prefix: bool,
    pub cache_max_age_seconds: u32,
    pub max_urls: u32,
    pub max_bytes: u64,
    pub max_index_entries: u32,
    /// Serve an index split in several as an index of index files.
    pub nested_index: bool,
    /// Which name of the index robots.txt and `sitemapd robots` announce.
    pub index_format: IndexFormat,
    pub lastmod_fallback: bool,
    /// Bytes of sites (their settings and robots.txt) kept in memory.
    pub(crate) site_cache_bytes: u64,
    pub(crate) gzip_level: u32,
    pub retry_after_seconds: u32,
    pub skip_report_interval_ms: u64,
    pub shutdown_grace_seconds: u64,
    pub log_format: LogFormat,
    /// Bytes of built pages kept in memory.
    pub(crate) page_cache_bytes: u64,
    /// Where built pages are also kept on disk, if anywhere.
    #[serde(default)]
    pub page_cache_dir: Option<PathBuf>,
    /// Pages built at once, at most; more cold requests wait, then are shed.
    pub max_concurrent_builds: u32,
    /// How long a cold request waits for a build slot before a `503`.
    pub build_wait_ms: u64,
    /// How long the page summaries are trusted without a change
    /// notification (0: read them on every request).
    pub summary_max_age_ms: u64,
    /// Bytes of page summaries kept in memory.
    pub(crate) summary_cache_bytes: u64,
    /// How often changed pages are rebuilt in the background (0: never).
    pub warm_up_interval_ms: u64,
    /// How often committed changes are folded into pages.
    pub fold_interval_ms: u64,
    /// Most changed rows one fold reads before it commits.
    pub fold_batch_rows: u64,
    /// Most bytes one fold holds in the service of the rows it places; one
    /// that would hold more folds fewer rows.
    pub fold_memory_bytes: u64,
    /// About how long the service's folds of a backlog take each: it
    /// sizes their batches (at most `fold_batch_rows`) to it.
    pub fold_batch_ms: u64,
    /// How long the change feed keeps an entry ("7d", "12h").
    #[serde(with = "humantime_serde")]
    pub change_log_retention: std::time::Duration,
    /// Most entries the change feed keeps; the oldest go first.
    pub(crate) change_log_max_rows: u64,
    /// Digests (`sha256:…`, from `sitemapd token`) of the write API's bearer
    /// tokens; none leaves the API off.
    #[serde(default)]
    pub api_token_hashes: Vec<String>,
    /// Largest request body the API reads, counted after decompression.
    pub api_max_body_bytes: u64,
    /// Most records in one API request.
    pub api_max_records: u32,
    /// How long a connection may take to send a request's headers, counted
    /// from when it starts waiting for them.
    pub header_read_timeout_ms: u64,
    /// How long a connection may stay open with nothing asked of it.
    pub keep_alive_timeout_ms: u64,
    /// How long a client may accept no bytes of its response.
    pub write_stall_timeout_ms: u64,
    /// Connections served in full at once.
    pub max_connections: u32,
    /// Bytes all response bodies in flight may hold together.
    pub response_memory_bytes: u64,
    /// The primary site's IndexNow key; none leaves its push off.
    #[serde(default)]
    pub indexnow_key: Option<String>,
    /// Where IndexNow batches are POSTed.
    pub indexnow_endpoint: String,
    /// How long the first change of a batch waits for more to join it.
    pub indexnow_batch_delay_ms: u64,
    /// URL templates with `{sitemap}`, each sent a GET with a site's index
    /// URL when the index changes.
    #[serde(default)]
    pub submit_urls: Vec<String>,
    /// The least time between two submissions to one template.
    pub submit_interval_seconds: u64,
    /// Whether fetches of sitemap files are kept in the crawler ledger.
    pub crawler_ledger: bool,
    /// A directory of `<family>.json` address ranges (the shape Google and
    /// Bing publish) that verify crawlers; re-read when its files change.
    #[serde(default)]
    pub crawler_ranges_dir: Option<PathBuf>,
    /// Whether crawlers are also verified by reverse-then-forward DNS.
    pub crawler_verify_dns: bool,
    /// Networks (CIDR) of the proxies whose `Forwarded` / `X-Forwarded-For`
    /// give the client's address; anyone else's are ignored.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// `off`, or `json`: one line per request.
    pub access_log: AccessLogFormat,
    /// Where the access log goes (reopened on SIGHUP); none: stdout.
    #[serde(default)]
    pub access_log_file: Option<PathBuf>,
}

/// `access_log`: whether requests are logged, one JSON line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    Off,
    Json,
}

/// The settings, checked once, with what they describe parsed: what the
/// rest of the service takes.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    /// Every configured site, the primary one first.
    pub sites: Vec<Site>,
    /// The write API's tokens (none: the API is off).
    pub(crate) tokens: Tokens,
}

impl Config {
    /// Loads the layers (see [`Settings::load`]) and checks them.
    pub fn load(file: Option<&Path>) -> Result<Config, Error> {
        Config::new(Settings::load(file)?)
    }

    /// Checks `settings` and parses the sites and tokens they describe.
    pub fn new(settings: Settings) -> Result<Config, Error> {
        settings.validate()?;
        let sites = settings.sites()?;
        let tokens =
            Tokens::from_hashes(&settings.api_token_hashes).map_err(|hash| Error::Invalid {
                key: "api_token_hashes".into(),
                value: hash,
                expected:
                    "digests as `sitemapd token` prints them: sha256: and 64 lower-case hex digits"
                        .into(),
            })?;
        Ok(Config {
            settings,
            sites,
            tokens,
        })
    }

    /// What a site that does not set `index_format` or `nested_index` takes.
    pub fn site_defaults(&self) -> SiteDefaults {
        self.settings.site_defaults()
    }

    /// These settings on another database, read from its primary alone:
    /// another cell's, for a site's move.
    pub fn on_database(&self, database_url: &str) -> Result<Config, Error> {
        Config::new(Settings {
            database_url: DatabaseUrl::new(database_url),
            database_read_url: None,
            ..self.settings.clone()
        })
    }

    /// The primary site (`site`, `base_url`): the default of records and
    /// commands that name none.
    pub fn primary_site(&self) -> &Site {
        &self.sites[0]
    }
}

/// One more site, beside the primary one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSettings {
    pub base_url: String,
    /// Whether this site's index also lists its subfolder sites' pages.
    #[serde(default)]
    pub include_subfolder_sites: bool,
    #[serde(default)]
    pub robots_txt: Option<String>,
    #[serde(default)]
    pub robots_file: Option<PathBuf>,
    #[serde(default)]
    pub indexnow_key: Option<String>,
    #[serde(default)]
    pub index_format: Option<IndexFormat>,
    #[serde(default)]
    pub nested_index: Option<bool>,
    #[serde(default)]
    pub robots_check: Option<RobotsCheck>,
    #[serde(default)]
    pub robots_check_agents: Option<Vec<String>>,
    #[serde(default)]
    pub audit: Option<bool>,
    #[serde(default)]
    pub audit_origin: Option<String>,
    #[serde(default)]
    pub audit_requests_per_second: Option<f64>,
    #[serde(default)]
    pub audit_user_agent: Option<String>,
    #[serde(default)]
    pub audit_interval: Option<String>,
    #[serde(default)]
    pub audit_leave_out: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// A database URL; its password never reaches a log or a `Debug` print.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        DatabaseUrl(url.into())
    }

    /// The URL itself, for connecting.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with any password replaced, for logs; one naming several
    /// hosts (`postgres://h1,h2:5433/db`) too.
    pub fn redacted(&self) -> String {
        let Some((scheme, rest)) = self.0.split_once("://") else {
            return "<unparsable database URL>".to_owned();
        };
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                let password = if userinfo.contains(':') { ":***" } else { "" };
                format!("{scheme}://{user}{password}@{hosts}{tail}")
            }
            None => self.0.clone(),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Settings {
    /// Loads the layers (defaults, `file` if given, environment), unchecked:
    /// [`Config::new`] checks them.
    pub(crate) fn load(file: Option<&Path>) -> Result<Settings, Error> {
        let mut figment = Figment::from(Toml::string(DEFAULTS));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        let figment = figment
            .merge(Env::raw().only(&["DATABASE_URL", "DATABASE_READ_URL"]))
            .merge(
                Env::prefixed("SITEMAPD_")
                    .ignore(&["CONFIG_FILE"])
                    .split("__"),
            );
        Self::from_figment(figment)
    }

    /// The built-in defaults alone (what tests start from).
    pub fn defaults() -> Settings {
        Self::from_figment(Figment::from(Toml::string(DEFAULTS)))
            .expect("built-in defaults are valid")
    }

    fn from_figment(figment: Figment) -> Result<Settings, Error> {
        figment.extract().map_err(|e| Error::Load(Box::new(e)))
    }

    /// Checks every value whose type alone does not make it valid.
    /// `trusted_proxies` parsed: each a network, or an address alone.
    fn trusted_proxy_networks(&self) -> Result<Vec<ipnet::IpNet>, Error> {
        self.trusted_proxies
            .iter()
            .map(|text| {
                text.parse::<ipnet::IpNet>()
                    .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| Error::Invalid {
                        key: "trusted_proxies".into(),
                        value: text.clone(),
                        expected:
                            "networks in CIDR form (\"10.0.0.0/8\", \"::1/128\") or addresses"
                                .into(),
                    })
            })
            .collect()
    }

    /// What the crawler ledger, its lookups and the access log take.
    pub(crate) fn crawler_settings(&self) -> crate::crawlers::CrawlerSettings {
        crate::crawlers::CrawlerSettings {
            ranges_dir: self.crawler_ranges_dir.clone(),
            verify_dns: self.crawler_verify_dns,
            trusted_proxies: self.trusted_proxy_networks().unwrap_or_default(),
            ledger: self.crawler_ledger,
            access_log: self.access_log == AccessLogFormat::Json,
            access_log_file: self.access_log_file.clone(),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        let invalid = |key: &str, value: &dyn fmt::Display, expected: String| Error::Invalid {
            key: key.to_owned(),
            value: value.to_string(),
            expected,
        };
        if !is_section_slug(&self.site) {
            return Err(invalid("site", &self.site, format!("a slug: {SLUG_RULE}")));
        }
        if !(1..=sitemap::PROTOCOL_MAX_URLS).contains(&self.max_urls) {
            return Err(invalid(
                "max_urls",
                &self.max_urls,
                format!("1 to {} (the protocol's limit)", sitemap::PROTOCOL_MAX_URLS),
            ));
        }
        if !(sitemap::MIN_MAX_BYTES..=sitemap::PROTOCOL_MAX_BYTES).contains(&self.max_bytes) {
            return Err(invalid(
                "max_bytes",
                &self.max_bytes,
                format!(
                    "{} (room for the longest possible entry) to {} (the protocol's limit)",
                    sitemap::MIN_MAX_BYTES,
                    sitemap::PROTOCOL_MAX_BYTES
                ),
            ));
        }
        if !(1..=sitemap::PROTOCOL_MAX_INDEX_ENTRIES).contains(&(self.max_index_entries as usize)) {
            return Err(invalid(
                "max_index_entries",
                &self.max_index_entries,
                format!(
                    "1 to {} (the protocol's limit)",
                    sitemap::PROTOCOL_MAX_INDEX_ENTRIES
                ),
            ));
        }
        if self.gzip_level > 9 {
            return Err(invalid("gzip_level", &self.gzip_level, "0 to 9".into()));
        }
        if self.db_max_connections == 0 {
            return Err(invalid(
                "db_max_connections",
                &self.db_max_connections,
                "at least 1".into(),
            ));
        }
        if self.skip_report_interval_ms == 0 {
            return Err(invalid(
                "skip_report_interval_ms",
                &self.skip_report_interval_ms,
                "at least 1".into(),
            ));
        }
        if self.max_concurrent_builds == 0 {
            return Err(invalid(
                "max_concurrent_builds",
                &self.max_concurrent_builds,
                "at least 1".into(),
            ));
        }
        if self.api_max_body_bytes == 0 || self.api_max_records == 0 {
            return Err(invalid(
                "api_max_body_bytes/api_max_records",
                &format!("{}/{}", self.api_max_body_bytes, self.api_max_records),
                "both at least 1".into(),
            ));
        }
        self.trusted_proxy_networks()?;
        if self.access_log_file.is_some() && self.access_log == AccessLogFormat::Off {
            return Err(invalid(
                "access_log_file",
                &self
                    .access_log_file
                    .as_deref()
                    .unwrap_or(Path::new(""))
                    .display(),
                "set with access_log = \"json\" (the access log is off)".into(),
            ));
        }
        if self.change_log_retention.is_zero() {
            return Err(invalid(
                "change_log_retention",
                &humantime_serde::re::humantime::format_duration(self.change_log_retention),
                "a duration above zero, such as \"7d\" or \"12h\"".into(),
            ));
        }
        for (key, value) in [
            ("submit_interval_seconds", self.submit_interval_seconds),
            ("fold_interval_ms", self.fold_interval_ms),
            ("fold_batch_rows", self.fold_batch_rows),
            ("fold_memory_bytes", self.fold_memory_bytes),
            ("fold_batch_ms", self.fold_batch_ms),
            ("change_log_max_rows", self.change_log_max_rows),
            ("db_read_timeout_ms", self.db_read_timeout_ms),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("keep_alive_timeout_ms", self.keep_alive_timeout_ms),
            ("write_stall_timeout_ms", self.write_stall_timeout_ms),
            ("max_connections", u64::from(self.max_connections)),
            ("response_memory_bytes", self.response_memory_bytes),
        ] {
            if value == 0 {
                return Err(invalid(key, &value, "at least 1".into()));
            }
        }
        if self.keep_alive_timeout_ms > self.header_read_timeout_ms {
            return Err(invalid(
                "keep_alive_timeout_ms",
                &self.keep_alive_timeout_ms,
                format!(
                    "at most header_read_timeout_ms ({}): a connection waiting for its next \
                     request is also waiting for that request's headers",
                    self.header_read_timeout_ms
                ),
            ));
        }
        for (key, url) in [
            ("database_url", Some(&self.database_url)),
            ("database_read_url", self.database_read_url.as_ref()),
        ] {
            if let Some(url) = url
                && let Err(error) = crate::store::Servers::parse(url.expose())
            {
                return Err(invalid(
                    key,
                    &url.redacted(),
                    format!(
                        "a URL such as postgres://user@host:5432/dbname, or of several hosts \
                         (postgres://h1:5432,h2:5433/dbname?target_session_attrs=read-write): {error}"
                    ),
                ));
            }
        }
        if !is_web_url(&self.indexnow_endpoint) {
            return Err(invalid(
                "indexnow_endpoint",
                &self.indexnow_endpoint,
                "an http or https URL, such as https://api.indexnow.org/indexnow".into(),
            ));
        }
        for template in &self.submit_urls {
            let filled = template.replace(SITEMAP_PLACEHOLDER, "https%3A%2F%2Fexample.com%2F");
            if !template.contains(SITEMAP_PLACEHOLDER) || !is_web_url(&filled) {
                return Err(invalid(
                    "submit_urls",
                    template,
                    format!(
                        "http or https URL templates holding {SITEMAP_PLACEHOLDER}, such as \
                         https://engine.example/ping?sitemap={SITEMAP_PLACEHOLDER}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// What a site that does not say takes.
    pub(crate) fn site_defaults(&self) -> SiteDefaults {
        SiteDefaults {
            index_format: self.index_format,
            nested_index: self.nested_index,
        }
    }

    /// Every site of the file, the primary one first, each checked as the
    /// write API checks a site (the key named is the setting at fault), and
    /// no two that requests could not tell apart.
    fn sites(&self) -> Result<Vec<Site>, Error> {
        let primary = SiteSettings {
            base_url: self.base_url.clone(),
            include_subfolder_sites: self.include_subfolder_sites,
            robots_txt: self.robots_txt.clone(),
            robots_file: self.robots_file.clone(),
            indexnow_key: self.indexnow_key.clone(),
            index_format: None,
            nested_index: None,
            robots_check: self.robots_check,
            robots_check_agents: self.robots_check_agents.clone(),
            audit: self.audit,
            audit_origin: self.audit_origin.clone(),
            audit_requests_per_second: self.audit_requests_per_second,
            audit_user_agent: self.audit_user_agent.clone(),
            audit_interval: self.audit_interval.clone(),
            audit_leave_out: self.audit_leave_out.clone(),
        };
        let mut sites = vec![primary.site(&self.site, "", self.site_defaults())?];
        for (name, extra) in &self.sites {
            sites.push(extra.site(name, &format!("sites.{name}."), self.site_defaults())?);
        }
        for (i, a) in sites.iter().enumerate() {
            for b in &sites[i + 1..] {
                if let Some(clash) = a.clash(b, self.proxy_strips_prefix) {
                    return Err(Error::Invalid {
                        key: "sites".into(),
                        value: format!(
                            "{} ({}) and {} ({})",
                            a.name, a.base_url, b.name, b.base_url
                        ),
                        expected: format!("sites requests can tell apart: {clash}"),
                    });
                }
            }
        }
        Ok(sites)
    }
}

impl SiteSettings {
    /// The site `name` these settings describe, whose keys are `prefix`
    /// and the setting's name.
    fn site(&self, name: &str, prefix: &str, defaults: SiteDefaults) -> Result<Site, Error> {
        let robots_txt = match (&self.robots_txt, &self.robots_file) {
            (Some(_), Some(_)) => {
                return Err(Error::Invalid {
                    key: format!("{prefix}robots_txt"),
                    value: name.to_owned(),
                    expected: "robots_txt or robots_file, not both".into(),
                });
            }
            (Some(text), None) => Some(text.clone()),
            (None, Some(path)) => {
                Some(std::fs::read_to_string(path).map_err(|e| Error::Invalid {
                    key: format!("{prefix}robots_file"),
                    value: path.display().to_string(),
                    expected: format!("a readable UTF-8 file ({e})"),
                })?)
            }
            (None, None) => None,
        };
        let spec = SiteSpec {
            base_url: self.base_url.clone(),
            robots_txt,
            include_subfolder_sites: Some(self.include_subfolder_sites),
            indexnow_key: self.indexnow_key.clone(),
            index_format: self.index_format,
            nested_index: self.nested_index,
            robots_check: self.robots_check,
            robots_check_agents: self.robots_check_agents.clone(),
            audit: self.audit,
            audit_origin: self.audit_origin.clone(),
            audit_requests_per_second: self.audit_requests_per_second,
            audit_user_agent: self.audit_user_agent.clone(),
            audit_interval: self.audit_interval.clone(),
            audit_leave_out: self.audit_leave_out.clone(),
        };
        spec.site(name, defaults).map_err(|errors| {
            let first = &errors[0];
            let key = match first.field {
                "name" if prefix.is_empty() => "site".to_owned(),
                "name" => "sites".to_owned(),
                field => format!("{prefix}{field}"),
            };
            Error::Invalid {
                key,
                value: first.value.clone(),
                expected: first.expected.clone(),
            }
        })
    }
}

/// What `{sitemap}` in a `submit_urls` template stands for: the site's
/// index URL, percent-encoded.
pub(crate) const SITEMAP_PLACEHOLDER: &str = "{sitemap}";

fn is_web_url(text: &str) -> bool {
    Url::parse(text).is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
}

#[cfg(test)]
mod tests {
    use figment::providers::Serialized;

    use super::*;

    fn with(key: &str, value: impl serde::Serialize) -> Result<Config, Error> {
        Config::new(Settings::from_figment(
            Figment::from(Toml::string(DEFAULTS)).merge(Serialized::default(key, value)),
        )?)
    }

    fn sites(settings: &Settings) -> Result<Vec<Site>, Error> {
        Config::new(settings.clone()).map(|config| config.sites)
    }

    #[test]
    fn defaults_work_with_no_configuration() {
        let settings = Settings::defaults();
        assert_eq!(settings.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(
            settings.database_url.expose(),
            "postgres://postgres@127.0.0.1:5432/sitemapd"
        );
        let site = &sites(&settings).expect("valid")[0];
        assert_eq!(site.base_url, "http://localhost:8080/");
        assert_eq!(
            (site.origin.as_str(), site.path_prefix.as_str()),
            ("http://localhost:8080", "/")
        );
    }

    #[test]
    fn base_url_path_gets_a_trailing_slash_and_host_is_lowered() {
        let site = with("base_url", "https://Example.COM:443/shop")
            .expect("valid")
            .sites
            .remove(0);
        assert_eq!(site.base_url, "https://example.com/shop/");
        assert_eq!(site.path_prefix, "/shop/");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (key, value) in [
            ("max_urls", 50_001_u64),
            ("max_urls", 0),
            ("max_bytes", 52_428_801),
            ("max_bytes", 1000),
            ("gzip_level", 10),
        ] {
            let err = with(key, value).expect_err(key).to_string();
            assert!(err.contains(&format!("`{key}`")), "{err}");
        }
        for (key, value) in [
            ("base_url", "ftp://example.com/"),
            ("base_url", "example.com"),
            ("base_url", "https://example.com/?a=1"),
            ("site", "Default"),
            ("database_url", "not a url"),
        ] {
            let err = with(key, value).expect_err(key).to_string();
            assert!(err.contains(&format!("`{key}`")), "{err}");
        }
        let err = with("max_urls", "lots").expect_err("type").to_string();
        assert!(err.contains("max_urls"), "{err}");
        let err = with("index_format", "zip")
            .expect_err("variant")
            .to_string();
        assert!(
            err.contains("index_format") && err.contains("xml.gz"),
            "{err}"
        );
    }

    #[test]
    fn robots_text_comes_from_the_setting_or_a_file() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let file = dir.path().join("robots.txt");
        std::fs::write(&file, "User-agent: *\nDisallow: /cart/\n").expect("write");
        let mut settings = Settings::defaults();
        settings.robots_file = Some(file.clone());
        let site = sites(&settings).expect("valid").remove(0);
        assert_eq!(
            site.robots_txt.as_deref(),
            Some("User-agent: *\nDisallow: /cart/\n")
        );

        settings.robots_txt = Some("User-agent: *".into());
        let both = sites(&settings).expect_err("text and file").to_string();
        assert!(both.contains("robots_txt or robots_file"), "{both}");

        settings.robots_txt = None;
        settings.robots_file = Some(dir.path().join("missing.txt"));
        let missing = sites(&settings).expect_err("missing file").to_string();
        assert!(
            missing.contains("`robots_file`") && missing.contains("missing.txt"),
            "{missing}"
        );
    }

    #[test]
    fn database_password_is_redacted() {
        let url = DatabaseUrl::new("postgres://app:s3cret@db:5432/sitemapd");
        assert_eq!(format!("{url:?}"), "postgres://app:***@db:5432/sitemapd");
        assert!(!url.redacted().contains("s3cret"));
    }
}
