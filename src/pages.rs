//! The page service: what every sitemap is answered from, below HTTP.
//!
//! The summaries say which pages a site has and when each last changed; a
//! page's bytes come from the cache, built once per version (the change time)
//! through a bounded number of build slots. HTTP adapts this to requests
//! (validators, encodings, status codes); the warm-up and `sitemapd robots`
//! use it directly.

use std::sync::Arc;

use crate::cache::{Chunks, PageCache, PageKey, Source};
use crate::config::Settings;
use crate::render::{RenderError, Renderer, build_page};
use crate::site::Site;
use crate::sitemap::name::IndexFile;
use crate::sitemap::{Encoding, IndexWriter};
use crate::store;
use crate::summaries::{PageSummary, Snapshot, Summaries};

#[derive(Debug)]
pub struct Pages {
    /// What a build needs: the store, the page settings, the build slots.
    pub(crate) renderer: Renderer,
    pub summaries: Arc<Summaries>,
    pub(crate) cache: PageCache,
    /// Digest of the settings that shape a page's bytes, for its ETag.
    pub(crate) fingerprint: String,
    /// Sitemaps listed per index file.
    pub(crate) max_index_entries: usize,
    /// The byte limit every document keeps, index files included.
    pub(crate) max_index_bytes: u64,
    /// Whether an index split in several is served as an index of them.
    pub(crate) nested_index: bool,
    /// How the index files are named where they are announced (robots.txt,
    /// `sitemapd robots`): `.xml` or `.xml.gz` (`index_format`).
    pub index_format: Encoding,
}

impl Pages {
    /// Every page of `site`, emptied ones included, in index order.
    pub async fn of(&self, site: &Site) -> Result<Snapshot, Arc<store::Error>> {
        self.summaries.of(&self.renderer.store, &site.name).await
    }

    /// One page's summary, if it exists and is not empty.
    pub async fn summary(
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
    pub async fn cached(
        &self,
        key: PageKey,
        route: &'static str,
    ) -> Result<(Chunks, Source), Arc<RenderError>> {
        self.cache
            .get_or_build(key, |key| {
                build_page(self.renderer.clone(), key.clone(), route)
            })
            .await
    }

    /// Every page an index of `members` lists or has listed (emptied ones
    /// included, which still move lastmods), site by site in `members`'
    /// order, each site's in index order.
    pub async fn index_pages<'a>(
        &self,
        members: &[&'a Site],
    ) -> Result<Vec<IndexedPage<'a>>, Arc<store::Error>> {
        let mut pages = Vec::new();
        for site in members {
            let snapshot = self.of(site).await?;
            pages.extend(snapshot.iter().map(|entry| IndexedPage {
                site,
                entry: entry.clone(),
            }));
        }
        Ok(pages)
    }

    /// Into how many runs of at most [`Pages::index_capacity`] pages an
    /// index of `members` splits now (one at least).
    pub async fn index_chunks(&self, members: &[&Site]) -> Result<usize, Arc<store::Error>> {
        let pages = self.index_pages(members).await?;
        let listed = pages.iter().filter(|p| p.entry.url_count > 0).count();
        Ok(listed.div_ceil(self.index_capacity(members)).max(1))
    }

    /// The index files robots.txt names for an index of `members`: each
    /// that lists pages, or, with `nested_index` and more than one, the
    /// root that lists them.
    pub async fn announced_indexes(
        &self,
        members: &[&Site],
    ) -> Result<Vec<IndexFile>, Arc<store::Error>> {
        let chunks = self.index_chunks(members).await?;
        Ok(if self.nested_index && chunks > 1 {
            vec![IndexFile::Root]
        } else {
            (1..=chunks).map(IndexFile::of_chunk).collect()
        })
    }

    /// How many pages one index file of `members` lists: `max_index_entries`,
    /// or fewer when that many entries under the longest of their base URLs
    /// would pass `max_bytes`.
    pub fn index_capacity(&self, members: &[&Site]) -> usize {
        members
            .iter()
            .map(|site| IndexWriter::capacity(&site.base_url, self.max_index_bytes))
            .min()
            .unwrap_or(self.max_index_entries)
            .min(self.max_index_entries)
            .max(1)
    }
}

/// A page as an index lists it: which site's, and its summary.
#[derive(Debug, Clone)]
pub struct IndexedPage<'a> {
    pub site: &'a Site,
    pub entry: store::IndexEntry,
}

/// A short, stable digest of whatever shapes a document's bytes besides its
/// rows (settings, base URL, this build), for the ETag's variant part.
pub fn digest(parts: &[&str]) -> String {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update(&[0]);
    }
    format!("{:08x}", hasher.finalize())
}

/// What shapes a page's bytes besides its rows, digested for its ETag.
pub fn fingerprint(settings: &Settings) -> String {
    digest(&[
        &settings.gzip_level.to_string(),
        &settings.lastmod_fallback.to_string(),
        &settings.max_urls.to_string(),
        &settings.max_bytes.to_string(),
    ])
}

/// The `Sitemap:` lines that make crawlers find `files` of a site's index,
/// named in `format`.
pub fn sitemap_lines(site: &Site, files: &[IndexFile], format: Encoding) -> Vec<String> {
    files
        .iter()
        .map(|file| format!("Sitemap: {}{}", site.base_url, file.file_name(format)))
        .collect()
}
