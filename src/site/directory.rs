//! Which site a request is for, read from `sitemap_sites` as requests ask,
//! and kept current on every replica as sites change.
//!
//! Nothing is read at start: a host's sites are read the first time a
//! request names the host, then kept in a cache bounded by bytes
//! (`site_cache_bytes`), so memory follows the hosts crawlers ask for, not
//! how many sites exist. A host is found by a map lookup, in time
//! independent of the number of sites. The schema announces every change
//! of a site or a token (channel `sitemapd_sites`), and the change listener
//! drops what it names here; a read that began before such a drop is never
//! kept after it.
//!
//! Among a host's sites a request goes to the one with the longest base
//! path that begins the request's path. When the proxy strips that path
//! (`proxy_strips_prefix`), the host alone decides, which writing a site
//! keeps unambiguous. Routing only *selects* a site: every URL printed
//! comes from its stored base URL, so a hostile `Host` can at worst select
//! another site or a 404.

use std::cell::RefCell;
use std::hash::Hash;
use std::sync::Arc;

use moka::future::Cache;

use super::Site;
use crate::epochs::{Epochs, Read, Recent};
use crate::sitemap::name::is_section_slug;
use crate::store::{self, Store};

/// The channel the schema announces site and token changes on.
pub(crate) const CHANNEL: &str = "sitemapd_sites";

/// The sites on one host, longest base path first.
#[derive(Debug, Default)]
pub(crate) struct HostSites {
    sites: Vec<Arc<Site>>,
    proxy_strips_prefix: bool,
}

/// A request resolved to a site: the site and the file name asked of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Routed<'a> {
    pub(crate) site: &'a Arc<Site>,
    /// The path after the site's base path, e.g. `sitemap-3.xml.gz`.
    pub(crate) file: &'a str,
}

impl HostSites {
    fn new(mut sites: Vec<Arc<Site>>, proxy_strips_prefix: bool) -> HostSites {
        sites.sort_by(|a, b| {
            b.path_prefix
                .len()
                .cmp(&a.path_prefix.len())
                .then_with(|| a.name.cmp(&b.name))
        });
        HostSites {
            sites,
            proxy_strips_prefix,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    pub(crate) fn all(&self) -> &[Arc<Site>] {
        &self.sites
    }

    fn weight(&self) -> usize {
        self.sites.iter().map(|site| site.weight()).sum::<usize>() + 64
    }

    /// The site and file a request for `path` is for, if any.
    pub(crate) fn route<'a>(&'a self, path: &'a str) -> Option<Routed<'a>> {
        if self.proxy_strips_prefix {
            return Some(Routed {
                site: self.sites.first()?,
                file: path.strip_prefix('/')?,
            });
        }
        self.sites
            .iter()
            .find(|site| path.starts_with(&site.path_prefix))
            .map(|site| Routed {
                site,
                file: &path[site.path_prefix.len()..],
            })
    }

    /// The sites whose pages `site`'s index lists: itself first, then the
    /// subfolder sites it holds, in base URL order.
    pub(crate) fn index_members<'a>(&'a self, site: &'a Site) -> Vec<&'a Site> {
        let mut held: Vec<&Site> = self
            .sites
            .iter()
            .map(Arc::as_ref)
            .filter(|s| site.holds(s))
            .collect();
        held.sort_by(|a, b| a.base_url.cmp(&b.base_url));
        std::iter::once(site).chain(held).collect()
    }

    /// Whether another site's index lists `site`'s pages, so that robots.txt
    /// needs that index alone.
    pub(crate) fn is_held(&self, site: &Site) -> bool {
        self.sites.iter().any(|other| other.holds(site))
    }

    /// The operator's robots.txt for the host: the first site's that has
    /// one, shortest base path first.
    pub(crate) fn robots_txt(&self) -> Option<&str> {
        self.sites
            .iter()
            .rev()
            .find_map(|site| site.robots_txt.as_deref())
    }

    /// The IndexNow key whose file a request asks for: `/{key}.txt` at the
    /// root of a host with a site of that key, or `{key}.txt` under the
    /// base path of the site of that key.
    pub(crate) fn indexnow_key<'a>(&'a self, path: &'a str) -> Option<&'a str> {
        // Asked of every request, most of which are not for a `.txt` file.
        if !path.ends_with(".txt") {
            return None;
        }
        let file = path.rsplit('/').next()?;
        let key = file.strip_suffix(".txt")?;
        let at_root = path.len() == file.len() + 1;
        if at_root
            && let Some(site) = self
                .sites
                .iter()
                .find(|site| site.indexnow_key.as_deref() == Some(key))
        {
            return site.indexnow_key.as_deref();
        }
        let routed = self.route(path)?;
        routed
            .site
            .indexnow_key
            .as_deref()
            .filter(|own| *own == key && routed.file == file)
    }
}

/// What a key is, among every cache here, for [`Epochs`].
#[derive(Hash)]
enum Scope<'a> {
    Host(&'a str),
    Name(&'a str),
    Token(&'a str),
    Sole,
}

/// The sites, read as asked and kept current.
#[derive(Debug)]
pub struct Directory {
    store: Store,
    strict_host: bool,
    proxy_strips_prefix: bool,
    hosts: Cache<String, Read<Arc<HostSites>>>,
    names: Cache<String, Read<Option<Arc<Site>>>>,
    tokens: Cache<String, Read<Option<Arc<str>>>>,
    /// The only site, as the sites of any host no site is on.
    sole: Cache<(), Read<Arc<HostSites>>>,
    epochs: Epochs,
}

thread_local! {
    /// What every request asks first, in front of `hosts` and `sole`.
    static RECENT_HOSTS: RefCell<Recent<String, Arc<HostSites>>> = RefCell::default();
    static RECENT_SOLE: RefCell<Recent<(), Arc<HostSites>>> = RefCell::default();
}

/// What a token's cached entry weighs, about.
const TOKEN_ENTRY_BYTES: u32 = 160;

impl Directory {
    /// Reads sites from `store`, keeping up to `cache_bytes` of them.
    pub fn new(
        store: Store,
        strict_host: bool,
        proxy_strips_prefix: bool,
        cache_bytes: u64,
    ) -> Directory {
        let weight = |bytes: usize| u32::try_from(bytes).unwrap_or(u32::MAX);
        Directory {
            store,
            strict_host,
            proxy_strips_prefix,
            hosts: Cache::builder()
                .max_capacity(cache_bytes)
                .weigher(move |host: &String, read: &Read<Arc<HostSites>>| {
                    weight(host.len() + read.value.weight())
                })
                .build(),
            names: Cache::builder()
                .max_capacity(cache_bytes / 2)
                .weigher(move |name: &String, read: &Read<Option<Arc<Site>>>| {
                    weight(name.len() + read.value.as_ref().map_or(64, |site| site.weight()))
                })
                .build(),
            tokens: Cache::builder()
                .max_capacity(cache_bytes / 8)
                .weigher(|_: &String, _: &Read<Option<Arc<str>>>| TOKEN_ENTRY_BYTES)
                .build(),
            sole: Cache::builder().max_capacity(1).build(),
            epochs: Epochs::new(),
        }
    }

    /// Whether a host's sites are told apart by host alone.
    pub(crate) fn proxy_strips_prefix(&self) -> bool {
        self.proxy_strips_prefix
    }

    /// The sites a request with this `Host` may reach: those on that host,
    /// or the only site when the host matches none and `strict_host` is off.
    pub(crate) async fn on_host(
        &self,
        host: Option<&str>,
    ) -> Result<Arc<HostSites>, Arc<store::Error>> {
        if let Some(host) = host {
            let found = self
                .epochs
                .fresh(
                    &self.hosts,
                    Some(&RECENT_HOSTS),
                    host,
                    &Scope::Host(host),
                    || async {
                        let sites = self.store.sites_on_host(host).await?;
                        Ok(Arc::new(HostSites::new(
                            sites.into_iter().map(Arc::new).collect(),
                            self.proxy_strips_prefix,
                        )))
                    },
                )
                .await?;
            if !found.is_empty() || self.strict_host {
                return Ok(found);
            }
        }
        if self.strict_host {
            return Ok(Arc::default());
        }
        self.epochs
            .fresh(
                &self.sole,
                Some(&RECENT_SOLE),
                &(),
                &Scope::Sole,
                || async {
                    let sole = self.store.sole_site().await?.map(Arc::new);
                    Ok(Arc::new(HostSites::new(
                        sole.into_iter().collect(),
                        self.proxy_strips_prefix,
                    )))
                },
            )
            .await
    }

    /// The sites on `site`'s own host.
    pub(crate) async fn beside(&self, site: &Site) -> Result<Arc<HostSites>, Arc<store::Error>> {
        self.on_host(Some(&site.host)).await
    }

    /// The site `name`, if there is one.
    pub(crate) async fn named(&self, name: &str) -> Result<Option<Arc<Site>>, Arc<store::Error>> {
        if !is_section_slug(name) {
            return Ok(None);
        }
        self.epochs
            .fresh(&self.names, None, name, &Scope::Name(name), || async {
                Ok(self.store.site(name).await?.map(|s| Arc::new(s.site)))
            })
            .await
    }

    /// The site whose token has this digest, if any.
    pub(crate) async fn token_site(
        &self,
        digest: &str,
    ) -> Result<Option<Arc<str>>, Arc<store::Error>> {
        self.epochs
            .fresh(
                &self.tokens,
                None,
                digest,
                &Scope::Token(digest),
                || async { Ok(self.store.token_site(digest).await?.map(Arc::from)) },
            )
            .await
    }

    /// Drops what a change notice (`site NAME HOST [OLD_HOST [OLD_NAME]]`
    /// or `token DIGEST`) names; returns the sites it changed, whose pages
    /// and summaries are to go too. A notice of another form drops
    /// everything.
    pub(crate) async fn forget(&self, notice: &str) -> Vec<String> {
        let mut words = notice.split(' ');
        match words.next() {
            Some("site") => {
                let name = words.next().unwrap_or_default();
                let host = words.next().unwrap_or_default();
                let old_host = words.next().unwrap_or_default();
                let old_name = words.next().filter(|old| !old.is_empty());
                self.forget_site(name, &[host, old_host]).await;
                if let Some(old_name) = old_name {
                    self.forget_site(old_name, &[]).await;
                }
                std::iter::once(name)
                    .chain(old_name)
                    .map(str::to_owned)
                    .collect()
            }
            Some("token") => {
                let digest = words.next().unwrap_or_default();
                self.epochs.mark(&Scope::Token(digest));
                self.tokens.invalidate(digest).await;
                Vec::new()
            }
            _ => {
                self.forget_all();
                Vec::new()
            }
        }
    }

    /// Drops what this process holds of the site `name` on `hosts`: what
    /// a write here does at once, before its notice arrives.
    pub(crate) async fn forget_site(&self, name: &str, hosts: &[&str]) {
        self.epochs.mark(&Scope::Name(name));
        self.epochs.mark(&Scope::Sole);
        self.names.invalidate(name).await;
        self.sole.invalidate_all();
        for host in hosts.iter().filter(|host| !host.is_empty()) {
            self.epochs.mark(&Scope::Host(host));
            self.hosts.invalidate(*host).await;
        }
    }

    /// Drops everything: what a lost listener means, as changes may have
    /// gone unheard.
    pub(crate) fn forget_all(&self) {
        self.epochs.mark_all();
        self.hosts.invalidate_all();
        self.names.invalidate_all();
        self.tokens.invalidate_all();
        self.sole.invalidate_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(name: &str, base_url: &str) -> Arc<Site> {
        Arc::new(Site::new(name, base_url, None).expect("valid"))
    }

    fn routed(sites: &HostSites, path: &str) -> Option<(String, String)> {
        sites
            .route(path)
            .map(|r| (r.site.name.clone(), r.file.to_owned()))
    }

    #[test]
    fn routes_by_longest_prefix() {
        let sites = HostSites::new(
            vec![
                site("default", "https://www.example.com/"),
                site("shop", "https://www.example.com/shop/"),
            ],
            false,
        );
        assert_eq!(
            routed(&sites, "/sitemap_index.xml"),
            Some(("default".into(), "sitemap_index.xml".into()))
        );
        assert_eq!(
            routed(&sites, "/shop/sitemap-1.xml.gz"),
            Some(("shop".into(), "sitemap-1.xml.gz".into()))
        );
        assert_eq!(
            routed(&sites, "/shopping/x"),
            Some(("default".into(), "shopping/x".into()))
        );
        assert_eq!(routed(&HostSites::default(), "/sitemap_index.xml"), None);
    }

    #[test]
    fn stripped_prefixes_route_by_host_alone() {
        let sites = HostSites::new(vec![site("shop", "https://shop.example.com/store/")], true);
        assert_eq!(
            routed(&sites, "/sitemap_index.xml"),
            Some(("shop".into(), "sitemap_index.xml".into()))
        );
    }
}
