//! Which configured site a request is for.
//!
//! A request is routed by its `Host` (port ignored), then, among the sites on
//! that host, by the longest base-URL path that begins the request's path.
//! When the proxy strips that path (`proxy_strips_prefix`), the host alone
//! decides, which configuration checks is unambiguous. Routing only *selects*
//! a configured site: every URL printed still comes from configuration, so a
//! hostile `Host` can at worst select another configured site or a 404.

use axum::http::{HeaderMap, Uri, Version, header, uri::Authority};

use crate::site::Site;

#[derive(Debug)]
pub struct Sites {
    sites: Vec<Site>,
    strict_host: bool,
    proxy_strips_prefix: bool,
}

/// A request resolved to a site: the site and the file name asked of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Routed<'a> {
    pub(crate) site: &'a Site,
    /// The path after the site's base path, e.g. `sitemap-3.xml.gz`.
    pub(crate) file: &'a str,
}

impl Sites {
    pub fn new(sites: Vec<Site>, strict_host: bool, proxy_strips_prefix: bool) -> Sites {
        Sites {
            sites,
            strict_host,
            proxy_strips_prefix,
        }
    }

    pub fn all(&self) -> &[Site] {
        &self.sites
    }

    /// The primary site: the default of records that name none.
    pub(crate) fn primary(&self) -> &Site {
        &self.sites[0]
    }

    /// The sites a request with this `Host` may reach: those on that host, or
    /// the only site when the host matches none and `strict_host` is off.
    pub(crate) fn on_host(&self, host: Option<&str>) -> Vec<&Site> {
        let on_host: Vec<&Site> = match host {
            Some(host) => self.sites.iter().filter(|s| s.host == host).collect(),
            None => Vec::new(),
        };
        if on_host.is_empty() && !self.strict_host && self.sites.len() == 1 {
            return vec![self.primary()];
        }
        on_host
    }

    /// The sites whose pages `site`'s index lists: itself first, then the
    /// subfolder sites it holds, in base URL order.
    pub fn index_members<'a>(&'a self, site: &'a Site) -> Vec<&'a Site> {
        let mut held: Vec<&Site> = self.sites.iter().filter(|s| site.holds(s)).collect();
        held.sort_by(|a, b| a.base_url.cmp(&b.base_url));
        std::iter::once(site).chain(held).collect()
    }

    /// Whether another site's index lists `site`'s pages, so that robots.txt
    /// needs that index alone.
    pub fn is_held(&self, site: &Site) -> bool {
        self.sites.iter().any(|other| other.holds(site))
    }

    /// The IndexNow key whose file a request asks for: `/{key}.txt` at the
    /// root of a host with a site of that key, or `{key}.txt` under the
    /// base path of the site of that key.
    pub(crate) fn indexnow_key<'a>(&'a self, host: Option<&str>, path: &'a str) -> Option<&'a str> {
        let file = path.rsplit('/').next()?;
        let key = file.strip_suffix(".txt")?;
        let at_root = path.len() == file.len() + 1;
        if at_root
            && let Some(site) = self
                .on_host(host)
                .into_iter()
                .find(|site| site.indexnow_key.as_deref() == Some(key))
        {
            return site.indexnow_key.as_deref();
        }
        let routed = self.route(host, path)?;
        routed
            .site
            .indexnow_key
            .as_deref()
            .filter(|own| *own == key && routed.file == file)
    }

    /// The site and file a request is for, if any.
    pub(crate) fn route<'a>(&'a self, host: Option<&str>, path: &'a str) -> Option<Routed<'a>> {
        let candidates = self.on_host(host);
        if self.proxy_strips_prefix {
            let site = candidates.first()?;
            return Some(Routed {
                site,
                file: path.strip_prefix('/')?,
            });
        }
        candidates
            .into_iter()
            .filter(|site| path.starts_with(&site.path_prefix))
            .max_by_key(|site| site.path_prefix.len())
            .map(|site| Routed {
                site,
                file: &path[site.path_prefix.len()..],
            })
    }
}

/// What is wrong with a request's `Host`, if anything (RFC 9112 §3.2): an
/// HTTP/1.1 request must carry exactly one, and any request's must be a
/// valid `host[:port]`.
pub(super) fn host_problem(version: Version, headers: &HeaderMap) -> Option<&'static str> {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if version >= Version::HTTP_11 => Some("an HTTP/1.1 request needs a Host header"),
        (None, _) => None,
        (Some(_), Some(_)) => Some("more than one Host header"),
        (Some(host), None) => {
            let valid = host
                .to_str()
                .ok()
                .filter(|text| !text.contains('@'))
                .and_then(|text| text.parse::<Authority>().ok())
                .is_some_and(|authority| {
                    let host = authority.host();
                    let port = &authority.as_str()[host.len()..];
                    is_host(host)
                        && (port.is_empty()
                            || port
                                .strip_prefix(':')
                                .is_some_and(|p| p.is_empty() || p.parse::<u16>().is_ok()))
                });
            (!valid).then_some("the Host header is not a valid host[:port]")
        }
    }
}

/// An IP literal in brackets, or a registered name of the characters RFC 3986
/// allows.
fn is_host(host: &str) -> bool {
    if host.starts_with('[') {
        return host.ends_with(']');
    }
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b))
}

/// The request's host name, lower-cased, without port: from `Host`, or from
/// an absolute request target.
pub(super) fn request_host(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    let authority = match headers.get(header::HOST) {
        Some(value) => value.to_str().ok()?.parse::<Authority>().ok()?,
        None => uri.authority()?.clone(),
    };
    Some(authority.host().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn sites(extra: &[(&str, &str)], strict: bool, strips: bool) -> Sites {
        let mut settings = Settings::defaults();
        settings.base_url = "https://www.example.com/".into();
        for (name, base_url) in extra {
            settings.sites.insert(
                (*name).into(),
                crate::config::SiteSettings {
                    base_url: (*base_url).into(),
                    include_subfolder_sites: false,
                    indexnow_key: None,
                    robots_txt: None,
                    robots_file: None,
                },
            );
        }
        settings.proxy_strips_prefix = strips;
        let config = crate::config::Config::new(settings).expect("valid sites");
        Sites::new(config.sites, strict, strips)
    }

    fn routed(sites: &Sites, host: Option<&str>, path: &str) -> Option<(String, String)> {
        sites
            .route(host, path)
            .map(|r| (r.site.name.clone(), r.file.to_owned()))
    }

    #[test]
    fn routes_by_host_then_longest_prefix() {
        let sites = sites(
            &[
                ("shop", "https://www.example.com/shop/"),
                ("blog", "https://blog.example.com/"),
            ],
            true,
            false,
        );
        let at = |host, path| routed(&sites, Some(host), path);
        assert_eq!(
            at("www.example.com", "/sitemap_index.xml"),
            Some(("default".into(), "sitemap_index.xml".into()))
        );
        assert_eq!(
            at("www.example.com", "/shop/sitemap-1.xml.gz"),
            Some(("shop".into(), "sitemap-1.xml.gz".into()))
        );
        assert_eq!(
            at("blog.example.com", "/sitemap_index.xml"),
            Some(("blog".into(), "sitemap_index.xml".into()))
        );
        assert_eq!(
            at("blog.example.com", "/shop/sitemap_index.xml"),
            Some(("blog".into(), "shop/sitemap_index.xml".into()))
        );
        assert_eq!(at("evil.example", "/sitemap_index.xml"), None);
        assert_eq!(routed(&sites, None, "/sitemap_index.xml"), None);
    }

    #[test]
    fn a_single_site_answers_any_host_unless_strict() {
        let lenient = sites(&[], false, false);
        assert_eq!(
            routed(&lenient, Some("127.0.0.1"), "/sitemap_index.xml").map(|r| r.0),
            Some("default".into())
        );
        assert_eq!(
            routed(&lenient, None, "/sitemap_index.xml").map(|r| r.0),
            Some("default".into())
        );
        let strict = sites(&[], true, false);
        assert_eq!(
            routed(&strict, Some("127.0.0.1"), "/sitemap_index.xml"),
            None
        );
    }

    #[test]
    fn stripped_prefixes_route_by_host_alone() {
        let sites = sites(&[("shop", "https://shop.example.com/store/")], true, true);
        assert_eq!(
            routed(&sites, Some("shop.example.com"), "/sitemap_index.xml"),
            Some(("shop".into(), "sitemap_index.xml".into()))
        );
    }

    #[test]
    fn a_missing_duplicated_or_malformed_host_is_named() {
        let with = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(header::HOST, value.parse().expect("header"));
            }
            headers
        };
        let http11 = Version::HTTP_11;
        assert_eq!(host_problem(http11, &with(&["www.example.com"])), None);
        assert_eq!(host_problem(http11, &with(&["[::1]:8080"])), None);
        assert_eq!(host_problem(Version::HTTP_10, &with(&[])), None);
        assert!(host_problem(http11, &with(&[])).is_some_and(|p| p.contains("needs")));
        assert!(host_problem(http11, &with(&["a.example", "b.example"])).is_some());
        for bad in [
            "bad host",
            "user@www.example.com",
            ":8080",
            "a.example:port",
            "",
        ] {
            assert!(host_problem(http11, &with(&[bad])).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn hosts_are_matched_without_port_or_case() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            "WWW.Example.com:8443".parse().expect("header"),
        );
        assert_eq!(
            request_host(&headers, &Uri::from_static("/x")).as_deref(),
            Some("www.example.com")
        );
        headers.insert(header::HOST, "[::1]:8080".parse().expect("header"));
        assert_eq!(
            request_host(&headers, &Uri::from_static("/x")).as_deref(),
            Some("[::1]")
        );
        headers.insert(header::HOST, "bad host".parse().expect("header"));
        assert_eq!(request_host(&headers, &Uri::from_static("/x")), None);
    }
}
