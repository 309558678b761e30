//! The ledger's writer. The request path puts each fetch in a bounded
//! buffer of its worker thread's own (a push under a lock no other thread
//! takes but the writer's, so no cache line moves between cores per
//! request, and no task is woken); a fetch like the one before it (the same
//! file, crawler and answer, in the same hour) only counts in that one's
//! entry. When the buffer is full, fetches are dropped and counted. The
//! writer takes the buffers every 50 ms, adds fetches up per file and
//! crawler (and per hour), counts them in the metrics, and writes the sums
//! once a second.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use compact_str::CompactString;
use foldhash::fast::RandomState;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::family::Crawler;
use crate::metrics::Metrics;
use crate::site::Site;
use crate::store::{FileFetches, HourKey, Store};

/// Buffers, one per worker thread while there are no more threads than
/// this; past it, threads share them.
const SHARDS: usize = 8;
/// Entries one buffer holds at most between two takes (50 ms): past
/// 80,000 fetches a second on one thread, each unlike the one before it,
/// the rest are dropped.
const SHARD_CAPACITY: usize = 4096;
const TAKE_EVERY: Duration = Duration::from_millis(50);
const WRITE_EVERY: Duration = Duration::from_secs(1);
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// One fetch of a sitemap file.
#[derive(Debug)]
pub(crate) struct Fetch {
    pub(crate) at: OffsetDateTime,
    pub(crate) site: Arc<Site>,
    /// Most names fit in place: a fetch allocates nothing.
    pub(crate) file: CompactString,
    pub(crate) crawler: Crawler,
    pub(crate) status: u16,
    /// The lastmod of the version served (none when the file does not
    /// exist, or could not be served).
    pub(crate) version: Option<OffsetDateTime>,
    pub(crate) bytes: u64,
}

/// Fetches taken in a row by one thread that differ only in their time and
/// bytes: a crawler asks for the same file again and again, and each
/// `304` of a busy page is alike. An entry per fetch was the request
/// path's costliest store (a cache line the writer last read on the other
/// core: 3.5–5.5% of a `304`'s user-time samples), and the writer hashed
/// each; a fetch like the last one only counts in it.
#[derive(Debug)]
struct Fetches {
    /// The last of them, with the bytes of all.
    fetch: Fetch,
    first: OffsetDateTime,
    count: u64,
}

impl Fetches {
    fn new(fetch: Fetch) -> Fetches {
        Fetches {
            first: fetch.at,
            fetch,
            count: 1,
        }
    }

    /// Counts `fetch` in these when it is like them (the same site, file,
    /// crawler, status and version, in the hour of the first); hands it
    /// back otherwise.
    fn absorb(&mut self, fetch: Fetch) -> Option<Fetch> {
        let last = &self.fetch;
        let alike = Arc::ptr_eq(&last.site, &fetch.site)
            && last.crawler == fetch.crawler
            && last.status == fetch.status
            && last.version == fetch.version
            && last.file == fetch.file
            && hour_of(self.first) == hour_of(fetch.at);
        if !alike {
            return Some(fetch);
        }
        self.count += 1;
        self.fetch.bytes += fetch.bytes;
        if fetch.at > self.fetch.at {
            self.fetch.at = fetch.at;
        }
        self.first = self.first.min(fetch.at);
        None
    }
}

/// The hour `at` falls in, as a number.
fn hour_of(at: OffsetDateTime) -> i64 {
    at.unix_timestamp().div_euclid(3600)
}

/// A site as the ledger keys it: by name, whichever reload of the
/// directory the fetch saw.
#[derive(Debug, Clone)]
struct SiteName(Arc<Site>);

impl PartialEq for SiteName {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.name == other.0.name
    }
}

impl Eq for SiteName {}

impl Hash for SiteName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

type FileKey = (SiteName, CompactString, Crawler);
type HourOf = (SiteName, Crawler, OffsetDateTime);

/// What the writer has not written yet.
#[derive(Default)]
struct Pending {
    files: HashMap<FileKey, FileFetches, RandomState>,
    hours: HashMap<HourOf, u64, RandomState>,
}

impl Pending {
    fn add(&mut self, fetches: Fetches) {
        let Fetches {
            fetch,
            first,
            count,
        } = fetches;
        let hour = first
            .replace_minute(0)
            .and_then(|t| t.replace_second(0))
            .and_then(|t| t.replace_nanosecond(0))
            .unwrap_or(first);
        let site = SiteName(fetch.site);
        *self
            .hours
            .entry((site.clone(), fetch.crawler, hour))
            .or_default() += count;
        // A file that does not exist gets a row only for a verified
        // crawler: anyone else could make up names without end.
        if fetch.version.is_none() && !fetch.crawler.is_verified() {
            return;
        }
        let key = (site, fetch.file, fetch.crawler);
        match self.files.get_mut(&key) {
            Some(file) => {
                file.first = file.first.min(first);
                if fetch.at >= file.last {
                    file.last = fetch.at;
                    file.last_status = fetch.status;
                    file.served_version = fetch.version;
                }
                file.fetches += count;
                file.bytes += fetch.bytes;
            }
            None => {
                let file = FileFetches {
                    site: key.0.0.name.clone(),
                    file: key.1.to_string(),
                    crawler: fetch.crawler.name(),
                    verified: fetch.crawler.is_verified(),
                    first,
                    last: fetch.at,
                    last_status: fetch.status,
                    served_version: fetch.version,
                    fetches: count,
                    bytes: fetch.bytes,
                };
                self.files.insert(key, file);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }
}

/// A worker thread's buffer, on cache lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<Vec<Fetches>>);

type Shards = Arc<[Shard; SHARDS]>;

/// The request path's end of the ledger.
#[derive(Debug, Clone)]
pub(crate) struct LedgerSender {
    shards: Shards,
    metrics: Arc<Metrics>,
}

/// The shard of the thread that runs this.
fn shard_of_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

fn lock(shard: &Shard) -> std::sync::MutexGuard<'_, Vec<Fetches>> {
    shard
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LedgerSender {
    pub(crate) fn record(&self, fetch: Fetch) {
        let mut buffer = lock(&self.shards[shard_of_thread()]);
        let Some(fetch) = (match buffer.last_mut() {
            Some(last) => last.absorb(fetch),
            None => Some(fetch),
        }) else {
            return;
        };
        if buffer.len() < SHARD_CAPACITY {
            buffer.push(Fetches::new(fetch));
        } else {
            drop(buffer);
            self.metrics.crawler_fetch_dropped();
        }
    }
}

/// Starts the writer; it writes what it holds once more when `stop` fires.
pub(crate) fn start(
    store: Store,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> (LedgerSender, tokio::task::JoinHandle<()>) {
    let shards = Shards::default();
    let sender = LedgerSender {
        shards: shards.clone(),
        metrics: metrics.clone(),
    };
    let task = tokio::spawn(add_up(store, shards, metrics, stop));
    (sender, task)
}

/// Takes the buffers every 50 ms and adds them up; once a second hands the
/// sums to the writer, or while the writer is still busy with the last
/// ones, keeps adding to them. Never waits on the database itself.
async fn add_up(store: Store, shards: Shards, metrics: Arc<Metrics>, stop: CancellationToken) {
    let (sums, to_write) = mpsc::channel::<Pending>(1);
    let writer = tokio::spawn(write(store.clone(), to_write));
    let mut pending = Pending::default();
    let mut taken = Vec::new();
    let mut take = tokio::time::interval(TAKE_EVERY);
    take.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut hand_over = tokio::time::interval(WRITE_EVERY);
    hand_over.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = take.tick() => take_buffers(&shards, &mut taken, &mut pending, &metrics),
            _ = hand_over.tick() => {
                if !pending.is_empty() {
                    match sums.try_send(std::mem::take(&mut pending)) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full(back)
                            | mpsc::error::TrySendError::Closed(back)) => pending = back,
                    }
                }
            }
            _ = prune.tick() => {
                let store = store.clone();
                tokio::spawn(async move {
                    if let Err(error) = store.prune_crawler_hours().await {
                        tracing::warn!(%error, "pruning the crawlers' hourly counts failed");
                    }
                });
            }
            () = stop.cancelled() => break,
        }
    }
    take_buffers(&shards, &mut taken, &mut pending, &metrics);
    if !pending.is_empty() {
        let _ = sums.send(pending).await;
    }
    drop(sums);
    let _ = writer.await;
}

/// Writes each batch of sums, again and again until it is written (a
/// batch is bounded by files, crawlers and hours); ends once every batch
/// handed over is written, or tried once more after the service stopped.
async fn write(store: Store, mut to_write: mpsc::Receiver<Pending>) {
    while let Some(pending) = to_write.recv().await {
        let files: Vec<FileFetches> = pending.files.into_values().collect();
        let hours: Vec<(HourKey, u64)> = pending
            .hours
            .into_iter()
            .map(|((site, crawler, hour), count)| {
                let key = HourKey {
                    site: site.0.name.clone(),
                    crawler: crawler.name(),
                    hour,
                };
                (key, count)
            })
            .collect();
        loop {
            match store.record_crawler_fetches(&files, &hours).await {
                Ok(()) => break,
                Err(error) if to_write.is_closed() => {
                    tracing::warn!(%error, files = files.len(), "the crawler ledger's last fetches were not written");
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, files = files.len(), "writing the crawler ledger failed; retrying");
                    tokio::time::sleep(WRITE_EVERY).await;
                }
            }
        }
    }
}

/// Swaps each buffer for the empty `taken`, and adds up what they held.
fn take_buffers(
    shards: &[Shard; SHARDS],
    taken: &mut Vec<Fetches>,
    pending: &mut Pending,
    metrics: &Metrics,
) {
    let mut counted: HashMap<(SiteName, Crawler, u16), u64, RandomState> = HashMap::default();
    for shard in shards {
        std::mem::swap(&mut *lock(shard), taken);
        for fetches in taken.drain(..) {
            let fetch = &fetches.fetch;
            *counted
                .entry((SiteName(fetch.site.clone()), fetch.crawler, fetch.status))
                .or_default() += fetches.count;
            pending.add(fetches);
        }
    }
    for ((site, crawler, status), fetches) in counted {
        metrics.crawler_fetches(&site.0.name, crawler, status, fetches);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn fetch(site: &Arc<Site>, file: &str, at: OffsetDateTime, status: u16, bytes: u64) -> Fetch {
        Fetch {
            at,
            site: site.clone(),
            file: file.into(),
            crawler: Crawler::Other,
            status,
            version: Some(datetime!(2026-11-01 00:00 UTC)),
            bytes,
        }
    }

    #[test]
    fn fetches_alike_in_a_row_count_in_one_entry_and_add_up_as_each() {
        let site = Arc::new(Site::new("shop", "https://shop.example/", None).expect("a site"));
        let other = Arc::new(Site::new("blog", "https://blog.example/", None).expect("a site"));
        let at = datetime!(2026-11-29 10:59:58 UTC);
        let mut fetches = Fetches::new(fetch(&site, "sitemap-1.xml.gz", at, 304, 0));
        for (seconds, bytes) in [(1, 0), (1, 10)] {
            let next = fetch(
                &site,
                "sitemap-1.xml.gz",
                at + time::Duration::seconds(seconds),
                304,
                bytes,
            );
            assert!(fetches.absorb(next).is_none());
        }
        // Any difference but the time and the bytes starts an entry.
        let unlike = [
            fetch(&site, "sitemap-2.xml.gz", at, 304, 0),
            fetch(&site, "sitemap-1.xml.gz", at, 200, 0),
            fetch(&other, "sitemap-1.xml.gz", at, 304, 0),
            // The next hour.
            fetch(
                &site,
                "sitemap-1.xml.gz",
                at + time::Duration::seconds(2),
                304,
                0,
            ),
        ];
        for fetch in unlike {
            assert!(fetches.absorb(fetch).is_some());
        }
        let mut pending = Pending::default();
        pending.add(fetches);
        let file = pending.files.values().next().expect("the file's row");
        assert_eq!((file.fetches, file.bytes), (3, 10));
        assert_eq!(
            (file.first, file.last),
            (at, at + time::Duration::seconds(1))
        );
        assert_eq!(pending.hours.values().copied().collect::<Vec<_>>(), [3]);
        assert_eq!(
            pending.hours.keys().next().expect("the hour").2,
            datetime!(2026-11-29 10:00 UTC)
        );
    }
}
