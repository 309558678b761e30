//! What a site's index lists, and into how many files it splits: read from
//! the page summaries, shaped by the index settings. The index routes, the
//! submitter and `sitemapd robots` share it; none of them needs a page's
//! bytes.

use std::sync::Arc;

use crate::config::Settings;
use crate::pages::summaries::{Snapshot, Summaries};
use crate::site::Site;
use crate::sitemap::IndexWriter;
use crate::sitemap::name::IndexFile;
use crate::store::{self, Store};

#[derive(Debug, Clone)]
pub struct Indexes {
    store: Store,
    summaries: Arc<Summaries>,
    /// Sitemaps listed per index file.
    max_entries: usize,
    /// The byte limit every document keeps, index files included.
    max_bytes: u64,
}

impl Indexes {
    /// The indexes as `settings` shape them, read through `summaries`.
    pub fn new(store: Store, summaries: Arc<Summaries>, settings: &Settings) -> Indexes {
        Indexes {
            store,
            summaries,
            max_entries: settings.max_index_entries as usize,
            max_bytes: settings.max_bytes,
        }
    }

    /// Every page of `site`, emptied ones included, in index order.
    pub(crate) async fn of(&self, site: &Site) -> Result<Snapshot, Arc<store::Error>> {
        self.summaries.of(&self.store, &site.name).await
    }

    /// What an index of `members` lists now: their summaries as the cache
    /// holds them (shared, not copied), and how many pages one index file
    /// takes.
    pub(crate) async fn listing<'a>(
        &self,
        members: &[&'a Site],
    ) -> Result<IndexListing<'a>, Arc<store::Error>> {
        let mut snapshots = Vec::with_capacity(members.len());
        for site in members {
            snapshots.push((*site, self.of(site).await?));
        }
        Ok(IndexListing {
            snapshots,
            capacity: self.capacity(members),
        })
    }

    /// The index files robots.txt names for an index of `members` (the
    /// first is the site whose index it is): each that lists pages, or,
    /// with its `nested_index` and more than one, the root that lists them.
    pub async fn announced(&self, members: &[&Site]) -> Result<Vec<IndexFile>, Arc<store::Error>> {
        let chunks = self.listing(members).await?.chunks();
        let nested = members.first().is_some_and(|site| site.nested_index);
        Ok(if nested && chunks > 1 {
            vec![IndexFile::Root]
        } else {
            (1..=chunks).map(IndexFile::of_chunk).collect()
        })
    }

    /// How many pages one index file of `members` lists: `max_index_entries`,
    /// or fewer when that many entries under the longest of their base URLs
    /// would pass `max_bytes`.
    fn capacity(&self, members: &[&Site]) -> usize {
        members
            .iter()
            .map(|site| IndexWriter::capacity(&site.base_url, self.max_bytes))
            .min()
            .unwrap_or(self.max_entries)
            .min(self.max_entries)
            .max(1)
    }
}

/// The pages an index of several sites lists, site by site, each site's in
/// index order.
#[derive(Debug)]
pub(crate) struct IndexListing<'a> {
    snapshots: Vec<(&'a Site, Snapshot)>,
    /// Pages one index file lists at most.
    pub(crate) capacity: usize,
}

impl IndexListing<'_> {
    /// Every page, emptied ones included (they still move lastmods), with
    /// its site.
    pub(crate) fn pages(&self) -> impl Iterator<Item = (&Site, &store::IndexEntry)> {
        self.snapshots
            .iter()
            .flat_map(|(site, snapshot)| snapshot.iter().map(move |entry| (*site, entry)))
    }

    /// The pages an index lists: the non-empty ones. (A site's first news
    /// sitemap is `listed` while the site has news records, but a urlset
    /// must list one URL: it waits for an article in its window.)
    pub(crate) fn listed(&self) -> impl Iterator<Item = (&Site, &store::IndexEntry)> {
        self.pages()
            .filter(|(_, entry)| entry.listed && entry.url_count > 0)
    }

    /// Into how many index files of [`IndexListing::capacity`] pages the
    /// listed pages split (one at least).
    pub(crate) fn chunks(&self) -> usize {
        self.listed().count().div_ceil(self.capacity).max(1)
    }
}
