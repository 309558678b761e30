//! The page summaries, held in memory for a moment, so that cached pages
//! and `304`s are answered without a database round trip.
//!
//! A site's summaries (a few hundred rows even at 10M URLs) are read whole
//! and kept until a write changes them: the schema notifies on every
//! statement that touches `sitemap_pages` (channel `sitemapd_pages`), and a
//! listener drops the snapshots when told. `summary_max_age_ms` bounds how
//! long a snapshot is trusted regardless: that covers a read replica that
//! has not yet replayed the change the primary announced, and a listener
//! that lost its connection (which also drops everything on reconnecting).
//! Writes through this process's own API drop them at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::future::Cache;

use time::OffsetDateTime;

use crate::store::{self, IndexEntry, Store};

/// The channel the schema notifies on.
pub(crate) const CHANNEL: &str = "sitemapd_pages";

/// What the summaries say of one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageSummary {
    pub(crate) url_count: i32,
    /// When a row of the page last changed: its version.
    pub(crate) lastmod: OffsetDateTime,
}

/// A site's pages as the summaries had them, in index order.
pub(crate) type Snapshot = Arc<Vec<IndexEntry>>;

#[derive(Debug)]
pub struct Summaries {
    max_age: Duration,
    /// Moves on every invalidation and is part of every key, so a read
    /// that began before an invalidation is never found after it.
    generation: AtomicU64,
    /// Requests arriving together for an expired snapshot share one read.
    snapshots: Cache<(String, u64), Snapshot>,
}

impl Summaries {
    /// Snapshots trusted for `max_age` at most; zero reads every time.
    pub fn new(max_age: Duration) -> Summaries {
        Summaries {
            max_age,
            generation: AtomicU64::new(0),
            snapshots: Cache::builder()
                .time_to_live(max_age.max(Duration::from_millis(1)))
                .max_capacity(10_000)
                .build(),
        }
    }

    /// Whether snapshots are kept at all.
    pub(crate) fn is_disabled(&self) -> bool {
        self.max_age.is_zero()
    }

    /// Every page of `site`, emptied ones included, in index order.
    pub(crate) async fn of(
        &self,
        store: &Store,
        site: &str,
    ) -> Result<Snapshot, Arc<store::Error>> {
        if self.is_disabled() {
            return Ok(Arc::new(store.index(site).await?));
        }
        let key = (site.to_owned(), self.generation.load(Ordering::Acquire));
        self.snapshots
            .try_get_with(key, async { Ok(Arc::new(store.index(site).await?)) })
            .await
    }

    /// One page's summary, if the index lists it.
    pub(crate) async fn page(
        &self,
        store: &Store,
        site: &str,
        section: &str,
        page: i32,
    ) -> Result<Option<PageSummary>, Arc<store::Error>> {
        let snapshot = self.of(store, site).await?;
        let found = snapshot
            .iter()
            .find(|e| e.page == page && e.section == section && e.listed);
        Ok(found.map(|e| PageSummary {
            url_count: e.url_count,
            lastmod: e.lastmod,
        }))
    }

    /// Forgets every snapshot: the next request reads the summaries anew.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
