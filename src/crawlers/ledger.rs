//! The ledger's writer. The request path puts each fetch in a bounded
//! buffer (a push under a lock: no task is woken per request); when the
//! buffer is full, fetches are dropped and counted. The writer takes the
//! buffer every 50 ms, adds fetches up per file and crawler (and per
//! hour), counts them in the metrics, and writes the sums once a second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::family::Crawler;
use crate::metrics::Metrics;
use crate::store::{FileFetches, HourKey, Store};

/// Fetches the buffer holds at most between two takes (50 ms): past
/// 160,000 fetches a second, the rest are dropped.
pub(crate) const BUFFER_CAPACITY: usize = 8192;
const TAKE_EVERY: Duration = Duration::from_millis(50);
const WRITE_EVERY: Duration = Duration::from_secs(1);
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// One fetch of a sitemap file.
#[derive(Debug)]
pub(crate) struct Fetch {
    pub(crate) at: OffsetDateTime,
    pub(crate) site: Arc<str>,
    pub(crate) file: Box<str>,
    pub(crate) crawler: Crawler,
    pub(crate) status: u16,
    /// The lastmod of the version served (none when the file does not
    /// exist, or could not be served).
    pub(crate) version: Option<OffsetDateTime>,
    pub(crate) bytes: u64,
}

type FileKey = (Arc<str>, Box<str>, Crawler);
type HourOf = (Arc<str>, Crawler, OffsetDateTime);

/// What the writer has not written yet.
#[derive(Default)]
struct Pending {
    files: HashMap<FileKey, FileFetches>,
    hours: HashMap<HourOf, u64>,
}

impl Pending {
    fn add(&mut self, fetch: Fetch) {
        let hour = fetch
            .at
            .replace_minute(0)
            .and_then(|t| t.replace_second(0))
            .and_then(|t| t.replace_nanosecond(0))
            .unwrap_or(fetch.at);
        *self
            .hours
            .entry((fetch.site.clone(), fetch.crawler, hour))
            .or_default() += 1;
        // A file that does not exist gets a row only for a verified
        // crawler: anyone else could make up names without end.
        if fetch.version.is_none() && !fetch.crawler.is_verified() {
            return;
        }
        let key = (fetch.site, fetch.file, fetch.crawler);
        match self.files.get_mut(&key) {
            Some(file) => {
                file.first = file.first.min(fetch.at);
                if fetch.at >= file.last {
                    file.last = fetch.at;
                    file.last_status = fetch.status;
                    file.served_version = fetch.version;
                }
                file.fetches += 1;
                file.bytes += fetch.bytes;
            }
            None => {
                let file = FileFetches {
                    site: key.0.to_string(),
                    file: key.1.to_string(),
                    crawler: fetch.crawler.name(),
                    verified: fetch.crawler.is_verified(),
                    first: fetch.at,
                    last: fetch.at,
                    last_status: fetch.status,
                    served_version: fetch.version,
                    fetches: 1,
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

/// The request path's end of the ledger.
#[derive(Debug, Clone)]
pub(crate) struct LedgerSender {
    buffer: Arc<Mutex<Vec<Fetch>>>,
    metrics: Arc<Metrics>,
}

impl LedgerSender {
    pub(crate) fn record(&self, fetch: Fetch) {
        let mut buffer = self
            .buffer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if buffer.len() < BUFFER_CAPACITY {
            buffer.push(fetch);
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
    let buffer = Arc::new(Mutex::new(Vec::with_capacity(BUFFER_CAPACITY)));
    let sender = LedgerSender {
        buffer: buffer.clone(),
        metrics: metrics.clone(),
    };
    let task = tokio::spawn(add_up(store, buffer, metrics, stop));
    (sender, task)
}

/// Takes the buffer every 50 ms and adds it up; once a second hands the
/// sums to the writer, or while the writer is still busy with the last
/// ones, keeps adding to them. Never waits on the database itself.
async fn add_up(
    store: Store,
    buffer: Arc<Mutex<Vec<Fetch>>>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let (sums, to_write) = mpsc::channel::<Pending>(1);
    let writer = tokio::spawn(write(store.clone(), to_write));
    let mut pending = Pending::default();
    let mut taken = Vec::with_capacity(BUFFER_CAPACITY);
    let mut take = tokio::time::interval(TAKE_EVERY);
    take.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut hand_over = tokio::time::interval(WRITE_EVERY);
    hand_over.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = take.tick() => take_buffer(&buffer, &mut taken, &mut pending, &metrics),
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
    take_buffer(&buffer, &mut taken, &mut pending, &metrics);
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
                    site: site.to_string(),
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

/// Swaps the buffer for the empty `taken`, and adds up what it held.
fn take_buffer(
    buffer: &Mutex<Vec<Fetch>>,
    taken: &mut Vec<Fetch>,
    pending: &mut Pending,
    metrics: &Metrics,
) {
    std::mem::swap(
        &mut *buffer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
        taken,
    );
    let mut counted: HashMap<(Arc<str>, Crawler, u16), u64> = HashMap::new();
    for fetch in taken.drain(..) {
        *counted
            .entry((fetch.site.clone(), fetch.crawler, fetch.status))
            .or_default() += 1;
        pending.add(fetch);
    }
    for ((site, crawler, status), fetches) in counted {
        metrics.crawler_fetches(&site, crawler, status, fetches);
    }
}
