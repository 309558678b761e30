//! The page service: what every sitemap is answered from, below HTTP.
//!
//! The summaries say which pages a site has and when each last changed; a
//! page's bytes come from the cache, built once per version (the change time)
//! through a bounded number of build slots. HTTP adapts this to requests
//! (validators, encodings, status codes); the warm-up and `sitemapd robots`
//! use it directly.

pub(crate) mod cache;
pub(crate) mod codec;
pub(crate) mod render;
pub mod skips;
pub(crate) mod summaries;
pub(crate) mod warmup;

use std::sync::Arc;

use crate::pages::cache::{Chunks, PageCache, PageKey, Source};
use crate::config::Settings;
use crate::pages::render::{RenderError, Renderer, build_page};
use crate::site::Site;
use crate::sitemap::name::IndexFile;
use crate::sitemap::{Encoding, IndexWriter};
use crate::store;
use crate::pages::summaries::{PageSummary, Snapshot, Summaries};

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

    /// One page's summary, if the index lists it.
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

    /// What an index of `members` lists now: their summaries as the cache
    /// holds them (shared, not copied), and how many pages one index file
    /// takes.
    pub async fn index_listing<'a>(
        &self,
        members: &[&'a Site],
    ) -> Result<IndexListing<'a>, Arc<store::Error>> {
        let mut snapshots = Vec::with_capacity(members.len());
        for site in members {
            snapshots.push((*site, self.of(site).await?));
        }
        Ok(IndexListing {
            snapshots,
            capacity: self.index_capacity(members),
        })
    }

    /// The index files robots.txt names for an index of `members`: each
    /// that lists pages, or, with `nested_index` and more than one, the
    /// root that lists them.
    pub async fn announced_indexes(
        &self,
        members: &[&Site],
    ) -> Result<Vec<IndexFile>, Arc<store::Error>> {
        let chunks = self.index_listing(members).await?.chunks();
        Ok(if self.nested_index && chunks > 1 {
            vec![IndexFile::Root]
        } else {
            (1..=chunks).map(IndexFile::of_chunk).collect()
        })
    }

    /// How many pages one index file of `members` lists: `max_index_entries`,
    /// or fewer when that many entries under the longest of their base URLs
    /// would pass `max_bytes`.
    fn index_capacity(&self, members: &[&Site]) -> usize {
        members
            .iter()
            .map(|site| IndexWriter::capacity(&site.base_url, self.max_index_bytes))
            .min()
            .unwrap_or(self.max_index_entries)
            .min(self.max_index_entries)
            .max(1)
    }
}

/// The pages an index of several sites lists, site by site, each site's in
/// index order.
#[derive(Debug)]
pub struct IndexListing<'a> {
    snapshots: Vec<(&'a Site, Snapshot)>,
    /// Pages one index file lists at most.
    pub capacity: usize,
}

impl IndexListing<'_> {
    /// Every page, emptied ones included (they still move lastmods), with
    /// its site.
    pub fn pages(&self) -> impl Iterator<Item = (&Site, &store::IndexEntry)> {
        self.snapshots
            .iter()
            .flat_map(|(site, snapshot)| snapshot.iter().map(move |entry| (*site, entry)))
    }

    /// The pages an index lists: the non-empty ones, and a site's first
    /// news sitemap, empty or not.
    pub fn listed(&self) -> impl Iterator<Item = (&Site, &store::IndexEntry)> {
        self.pages().filter(|(_, entry)| entry.listed)
    }

    /// Into how many index files of [`IndexListing::capacity`] pages the
    /// listed pages split (one at least).
    pub fn chunks(&self) -> usize {
        self.listed().count().div_ceil(self.capacity).max(1)
    }
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
