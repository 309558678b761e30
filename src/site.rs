//! A site as the service serves it: a name (the rows' `site` column) and a
//! base URL, from which every URL the service prints is built, and by whose
//! host and path requests are routed to it.

use url::Url;

use crate::sitemap::web_url_problem;

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
}

impl Site {
    /// The site `name` at `base_url`; the rule the base URL breaks, if any.
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
        Ok(Site {
            name: name.to_owned(),
            base_url: format!("{origin}{path_prefix}"),
            host: url.host_str().unwrap_or_default().to_ascii_lowercase(),
            origin,
            path_prefix,
            robots_txt,
            include_subfolder_sites: false,
            indexnow_key: None,
        })
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
}
