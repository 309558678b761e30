//! The page service: what every sitemap is answered from, below HTTP.
//!
//! The summaries say which pages a site has and when each last changed; a
//! page's bytes come from the cache, built once per version (the change time)
//! through a bounded number of build slots. HTTP adapts this to requests
//! (validators, encodings, status codes); the warm-up and `sitemapd robots`
//! use it directly.

pub(crate) mod cache;
pub(crate) mod codec;
mod indexes;
pub(crate) mod render;
pub mod skips;
pub(crate) mod summaries;
pub(crate) mod warmup;

use std::sync::Arc;

pub(crate) use indexes::{IndexListing, Indexes};

use crate::config::Settings;
use crate::pages::cache::{Chunks, PageCache, PageKey, Source};
use crate::pages::render::{RenderError, Renderer, build_page};
use crate::pages::summaries::{PageSummary, Summaries};
use crate::runtime::run_on;
use crate::site::Site;
use crate::sitemap::name::IndexFile;
use crate::store;

#[derive(Debug)]
pub struct Pages {
    /// What a build needs: the store, the page settings, the build slots.
    pub(crate) renderer: Renderer,
    pub summaries: Arc<Summaries>,
    pub(crate) cache: PageCache,
    /// Digest of the settings that shape a page's bytes, for its ETag.
    pub(crate) fingerprint: String,
    /// What the index files list.
    pub(crate) indexes: Indexes,
}

impl Pages {
    /// One page's summary, if the index lists it.
    pub(crate) async fn summary(
        &self,
        site: &Site,
        section: &str,
        page: i32,
    ) -> Result<Option<PageSummary>, Arc<store::Error>> {
        self.summaries
            .page(&self.renderer.store, &site.name, section, page)
            .await
    }

    /// A page's compressed bytes from the cache, built (once, holding a
    /// build slot) if they are not there at this version; `route` labels
    /// the build's metrics.
    pub(crate) async fn cached(
        &self,
        key: PageKey,
        route: &'static str,
    ) -> Result<(Chunks, Source), Arc<RenderError>> {
        self.cache
            .get_or_build(key, |key| {
                let build = build_page(self.renderer.clone(), key.clone(), route);
                async move {
                    run_on(&self.renderer.runtime, build)
                        .await
                        .unwrap_or(Err(RenderError::Stopping))
                }
            })
            .await
    }
}

/// A short, stable digest of whatever shapes a document's bytes besides its
/// rows (settings, base URL, this build), for the ETag's variant part.
pub(crate) fn digest(parts: &[&str]) -> String {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update(&[0]);
    }
    format!("{:08x}", hasher.finalize())
}

/// What shapes a page's bytes besides its rows, digested for its ETag.
pub(crate) fn fingerprint(settings: &Settings) -> String {
    digest(&[
        &settings.gzip_level.to_string(),
        &settings.lastmod_fallback.to_string(),
        &settings.max_urls.to_string(),
        &settings.max_bytes.to_string(),
    ])
}

/// The `Sitemap:` lines that make crawlers find `files` of a site's index,
/// named in the site's `index_format`.
pub fn sitemap_lines(site: &Site, files: &[IndexFile]) -> Vec<String> {
    let format = site.index_format.encoding();
    files
        .iter()
        .map(|file| format!("Sitemap: {}{}", site.base_url, file.file_name(format)))
        .collect()
}
