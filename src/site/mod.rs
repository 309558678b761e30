//! A site as the service serves it: a name (the rows' `site` column) and a
//! base URL, from which every URL the service prints is built, and by whose
//! host and path requests are routed to it.
//!
//! Sites are rows of `sitemap_sites`. [`spec`] checks what is written there,
//! whatever writes it (the configuration file, the write API, `sitemapd
//! sites`); `directory` reads them as requests ask for them and keeps
//! every replica current as they change.

pub mod admin;
pub mod audit;
pub(crate) mod directory;
pub mod moving;
pub mod robots;
pub mod spec;

use serde::{Deserialize, Serialize};
use url::Url;

pub use audit::AuditSettings;
pub use directory::Directory;
pub(crate) use directory::HostSites;
pub use robots::RobotsCheck;
pub use spec::{SiteDefaults, SiteError, SiteSpec};

use crate::sitemap::{self, web_url_problem};

/// A site as the service serves it, derived from its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub name: String,
    /// The base URL, ending in `/`: sitemap URLs are this plus a file name.
    pub base_url: String,
    /// Lower-case `scheme://host[:port]`.
    pub origin: String,
    /// Lower-case host name (no port): what requests are routed by.
    pub(crate) host: String,
    /// The base URL's path, starting and ending with `/`.
    pub path_prefix: String,
    /// The operator's robots.txt for this site's host, if configured.
    pub(crate) robots_txt: Option<String>,
    /// Whether this site's index also lists the pages of the sites in its
    /// subfolders (see [`Site::holds`]).
    pub(crate) include_subfolder_sites: bool,
    /// The site's IndexNow key, if it pushes changes (see `indexnow`).
    pub(crate) indexnow_key: Option<String>,
    /// Which name of its index robots.txt announces.
    pub(crate) index_format: IndexFormat,
    /// Whether an index split in several files is served as an index of them.
    pub(crate) nested_index: bool,
    /// What becomes of a loc its host's robots.txt disallows.
    pub(crate) robots_check: RobotsCheck,
    /// The user agents its locs are checked for.
    pub(crate) robots_check_agents: Vec<String>,
    /// Whether and how its URLs are fetched from the live site.
    pub audit: AuditSettings,
}

/// How the index is announced: `sitemap_index.xml` or its gzip file,
/// `sitemap_index.xml.gz` (both are always served).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
pub enum IndexFormat {
    #[default]
    #[serde(rename = "xml")]
    Xml,
    #[serde(rename = "xml.gz")]
    XmlGz,
}

impl IndexFormat {
    pub(crate) fn encoding(self) -> sitemap::Encoding {
        match self {
            IndexFormat::Xml => sitemap::Encoding::Plain,
            IndexFormat::XmlGz => sitemap::Encoding::Gzip,
        }
    }

    /// As the schema stores it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IndexFormat::Xml => "xml",
            IndexFormat::XmlGz => "xml.gz",
        }
    }

    pub fn parse(text: &str) -> Option<IndexFormat> {
        match text {
            "xml" => Some(IndexFormat::Xml),
            "xml.gz" => Some(IndexFormat::XmlGz),
            _ => None,
        }
    }
}

/// The longest base URL a site may have: its index files' URLs (the base
/// plus up to 26 bytes of file name) stay well within the 2,048 characters
/// a sitemap URL may take.
pub(crate) const MAX_BASE_URL_BYTES: usize = 2000;

impl Site {
    /// The site `name` at `base_url`, with no other setting; the rule the
    /// base URL breaks, if any.
    pub fn new(name: &str, base_url: &str, robots_txt: Option<String>) -> Result<Site, String> {
        let url = Url::parse(base_url).map_err(|e| format!("an absolute URL ({e})"))?;
        if let Some(rule) = web_url_problem(&url) {
            return Err(rule.to_owned());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("a URL without query or fragment".to_owned());
        }
        let mut path_prefix = url.path().to_owned();
        if !path_prefix.ends_with('/') {
            path_prefix.push('/');
        }
        let origin = url.origin().ascii_serialization();
        let base_url = format!("{origin}{path_prefix}");
        if base_url.len() > MAX_BASE_URL_BYTES {
            return Err(format!(
                "a URL of at most {MAX_BASE_URL_BYTES} bytes (this one is {})",
                base_url.len()
            ));
        }
        Ok(Site {
            name: name.to_owned(),
            base_url,
            host: url.host_str().unwrap_or_default().to_ascii_lowercase(),
            origin,
            path_prefix,
            robots_txt,
            include_subfolder_sites: false,
            indexnow_key: None,
            index_format: IndexFormat::Xml,
            nested_index: false,
            robots_check: RobotsCheck::default(),
            robots_check_agents: robots::DEFAULT_AGENTS.map(String::from).to_vec(),
            audit: AuditSettings::default(),
        })
    }

    /// The host requests for this site name (lower case, no port).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether this site's index lists `other`'s pages: it includes its
    /// subfolder sites, and `other` lies under its base URL, on the same
    /// scheme and host (never another host or subdomain: a sitemap index
    /// may only list what is below it).
    pub(crate) fn holds(&self, other: &Site) -> bool {
        self.include_subfolder_sites
            && other.name != self.name
            && other.origin == self.origin
            && other.path_prefix != self.path_prefix
            && other.path_prefix.starts_with(&self.path_prefix)
    }

    /// Why requests could not tell this site and `other` apart, if so.
    pub(crate) fn clash(&self, other: &Site, proxy_strips_prefix: bool) -> Option<&'static str> {
        if self.name == other.name {
            Some("two sites share the name")
        } else if self.host == other.host && self.path_prefix == other.path_prefix {
            Some("two sites share host and path")
        } else if self.host == other.host && proxy_strips_prefix {
            Some("with proxy_strips_prefix, sites on one host cannot be told apart")
        } else {
            None
        }
    }

    /// Bytes the site takes in memory, roughly: what caches weigh it by.
    pub(crate) fn weight(&self) -> usize {
        std::mem::size_of::<Site>()
            + self.name.len()
            + self.base_url.len()
            + self.origin.len()
            + self.host.len()
            + self.path_prefix.len()
            + self.robots_txt.as_ref().map_or(0, String::len)
            + self.indexnow_key.as_ref().map_or(0, String::len)
            + self
                .robots_check_agents
                .iter()
                .map(String::len)
                .sum::<usize>()
    }
}
