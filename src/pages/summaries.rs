//! The page summaries, held in memory, so that cached pages and `304`s are
//! answered without a database round trip.
//!
//! A site's summaries (a few hundred rows even at 10M URLs) are read whole
//! the first time a request needs them, and kept, within
//! `summary_cache_bytes` (least recently used sites go first), until a
//! change names the site: the schema notifies on every statement that
//! touches `sitemap_pages` or `sitemap_news_files` (channel
//! `sitemapd_pages`) with the names of the sites it changed, and the change
//! listener drops those sites alone. A read that began before a drop is
//! never kept after it. Writes through this process's own API drop their
//! sites at once.
//!
//! `summary_max_age_ms` bounds how late a change can show:
//! - without a read replica, summaries are trusted only while the listener
//!   has heard anything (a change or the heartbeat each replica sends a few
//!   times per max age) within that long; a listener that stops hearing,
//!   say behind a partition that drops packets, has the summaries read on
//!   every request until it hears again, and one that reconnects drops
//!   everything;
//! - with a read replica (`database_read_url`), which may not have replayed
//!   a change the primary announced, each snapshot is also kept that long
//!   at most.
//!
//! A change made with the schema's triggers off (a restore with
//! `--disable-triggers`) announces nothing: `NOTIFY sitemapd_pages, '*'`
//! after it.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use moka::future::Cache;

use time::OffsetDateTime;

use crate::epochs::{Epochs, Read, Recent};
use crate::store::{self, IndexEntry, Store};

/// The channel the schema notifies on.
pub(crate) const CHANNEL: &str = "sitemapd_pages";

/// A notice on [`CHANNEL`] that names no site: the listener's heartbeat.
pub(crate) const HEARTBEAT: &str = "~";

/// A notice that every site changed (also the empty one).
pub(crate) const EVERY_SITE: &str = "*";

/// What the summaries say of one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageSummary {
    pub(crate) url_count: i32,
    /// When a row of the page last changed: its version.
    pub(crate) lastmod: OffsetDateTime,
}

/// A site's pages as the summaries had them, in index order.
pub(crate) type Snapshot = Arc<Entries>;

/// Index entries, and where each section's run of them is, so that a
/// request finds its page among thousands without reading them all.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    entries: Vec<IndexEntry>,
    /// Each run of consecutive entries of one section, whose pages ascend.
    /// A section has one run, unless the database's collation sorts other
    /// names as equal to it and between its entries.
    runs: Vec<(String, Range<usize>)>,
}

impl Entries {
    /// `entries` as the index sorts them: by section, then page.
    pub(crate) fn new(entries: Vec<IndexEntry>) -> Entries {
        let mut runs: Vec<(String, Range<usize>)> = Vec::new();
        for (at, entry) in entries.iter().enumerate() {
            match runs.last_mut() {
                Some((section, run)) if *section == entry.section => run.end = at + 1,
                _ => runs.push((entry.section.clone(), at..at + 1)),
            }
        }
        Entries { entries, runs }
    }

    /// What the entries and runs hold, about.
    fn bytes(&self) -> usize {
        let entries: usize = self
            .entries
            .iter()
            .map(|entry| size_of::<IndexEntry>() + entry.section.len())
            .sum();
        let runs: usize = self
            .runs
            .iter()
            .map(|(section, _)| size_of::<(String, Range<usize>)>() + section.len())
            .sum();
        entries + runs
    }

    /// The listed entry of `page` in `section`.
    fn listed(&self, section: &str, page: i32) -> Option<&IndexEntry> {
        self.runs
            .iter()
            .filter(|(name, _)| name == section)
            .find_map(|(_, run)| {
                let run = &self.entries[run.clone()];
                let first = run.partition_point(|entry| entry.page < page);
                run[first..]
                    .iter()
                    .take_while(|entry| entry.page == page)
                    .find(|entry| entry.listed)
            })
    }
}

impl std::ops::Deref for Entries {
    type Target = [IndexEntry];

    fn deref(&self) -> &[IndexEntry] {
        &self.entries
    }
}

thread_local! {
    static RECENT: RefCell<Recent<String, Snapshot>> = RefCell::default();
}

#[derive(Debug)]
pub struct Summaries {
    max_age: Duration,
    /// Each site's snapshot; requests arriving together share one read.
    snapshots: Cache<String, Read<Snapshot>>,
    epochs: Epochs,
    /// When the listener last heard anything, in milliseconds since
    /// `started`; 0: never.
    heard_at: AtomicU64,
    started: Instant,
}

/// What a snapshot weighs besides its entries, about.
const SNAPSHOT_BYTES: usize = 96;

impl Summaries {
    /// Snapshots kept within `cache_bytes`, trusted while the listener is
    /// heard within `max_age` (and, with `replica_lag`, no longer than
    /// that each); a zero `max_age` reads them every time.
    pub fn new(max_age: Duration, cache_bytes: u64, replica_lag: bool) -> Summaries {
        let mut snapshots = Cache::builder().max_capacity(cache_bytes).weigher(
            |site: &String, read: &Read<Snapshot>| {
                u32::try_from(SNAPSHOT_BYTES + site.len() + read.value.bytes()).unwrap_or(u32::MAX)
            },
        );
        if replica_lag {
            snapshots = snapshots.time_to_live(max_age.max(Duration::from_millis(1)));
        }
        Summaries {
            max_age,
            snapshots: snapshots.build(),
            epochs: Epochs::new(),
            heard_at: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// Whether snapshots are kept at all.
    pub(crate) fn is_disabled(&self) -> bool {
        self.max_age.is_zero()
    }

    /// How often the listener should hear at least a heartbeat.
    pub(crate) fn heartbeat_interval(&self) -> Duration {
        (self.max_age / 4).max(Duration::from_millis(10))
    }

    /// The listener heard something: the snapshots are current.
    pub(crate) fn heard(&self) {
        let now = self.started.elapsed().as_millis().max(1);
        self.heard_at
            .store(u64::try_from(now).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// Whether kept snapshots are answered from: the listener was heard
    /// within the max age.
    pub fn trusted(&self) -> bool {
        let heard_at = self.heard_at.load(Ordering::Acquire);
        heard_at > 0
            && (self.started.elapsed().as_millis() as u64).saturating_sub(heard_at)
                <= self.max_age.as_millis() as u64
    }

    /// Every page of `site`, emptied ones included, in index order.
    pub(crate) async fn of(
        &self,
        store: &Store,
        site: &str,
    ) -> Result<Snapshot, Arc<store::Error>> {
        if self.is_disabled() || !self.trusted() {
            return Ok(Arc::new(Entries::new(store.index(site).await?)));
        }
        // Snapshots that expire by age (`replica_lag`) are not kept in
        // front of their cache, which expires them.
        let expiring = self.snapshots.policy().time_to_live().is_some();
        let recent = (!expiring).then_some(&RECENT);
        self.epochs
            .fresh(&self.snapshots, recent, site, &site, || async {
                Ok(Arc::new(Entries::new(store.index(site).await?)))
            })
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
        Ok(snapshot.listed(section, page).map(|e| PageSummary {
            url_count: e.url_count,
            lastmod: e.lastmod,
        }))
    }

    /// Forgets the snapshot of `site`: its next request reads it anew.
    pub(crate) async fn invalidate_site(&self, site: &str) {
        self.epochs.mark(&site);
        self.snapshots.invalidate(site).await;
    }

    /// Forgets the snapshots of what a notice on [`CHANNEL`] names.
    pub(crate) async fn follow(&self, notice: &str) {
        self.heard();
        match notice {
            HEARTBEAT => {}
            "" | EVERY_SITE => self.invalidate(),
            names => {
                for site in names.split(' ') {
                    self.invalidate_site(site).await;
                }
            }
        }
    }

    /// Forgets every snapshot: the next request reads the summaries anew.
    pub fn invalidate(&self) {
        self.epochs.mark_all();
        self.snapshots.invalidate_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_trusted_only_while_the_listener_is_heard() {
        let summaries = Summaries::new(Duration::from_millis(50), 1 << 20, false);
        assert!(!summaries.trusted(), "nothing heard yet");
        summaries.heard();
        assert!(summaries.trusted());
        std::thread::sleep(Duration::from_millis(120));
        assert!(
            !summaries.trusted(),
            "heard nothing for longer than the max age"
        );
        summaries.heard();
        assert!(summaries.trusted());
        assert!(summaries.heartbeat_interval() < Duration::from_millis(50));
    }

    #[test]
    fn a_page_is_found_in_its_sections_runs() {
        let entry = |section: &str, page, listed| IndexEntry {
            section: section.to_owned(),
            page,
            url_count: page * 10,
            lastmod: OffsetDateTime::UNIX_EPOCH,
            listed,
        };
        // As a case-insensitive collation may sort them: "Blog" and "blog"
        // as equals, their pages interleaved.
        let entries = Entries::new(vec![
            entry("Blog", 1, true),
            entry("blog", 1, true),
            entry("blog", 2, false),
            entry("Blog", 3, true),
            entry("blog", 3, true),
            entry("shop", 1, true),
            entry("shop", 2, true),
            entry("shop", 4, false),
            entry("shop", 4, true),
        ]);
        assert_eq!(entries.len(), 9);
        let found = |section, page| {
            entries
                .listed(section, page)
                .map(|e| (e.section.as_str(), e.page))
        };
        assert_eq!(found("Blog", 3), Some(("Blog", 3)));
        assert_eq!(found("blog", 3), Some(("blog", 3)));
        assert_eq!(found("blog", 2), None, "not listed");
        assert_eq!(found("Blog", 2), None);
        assert_eq!(found("shop", 2), Some(("shop", 2)));
        assert_eq!(found("shop", 4), Some(("shop", 4)), "the listed one of two");
        assert_eq!(found("shop", 3), None);
        assert_eq!(found("news", 1), None);
    }
}
