//! The ledger's writer: fetches come over a bounded channel from the
//! request path (dropped and counted when it is full), are added up per
//! file and crawler, and written at most once a second.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::family::Crawler;
use crate::metrics::Metrics;
use crate::store::{FileFetches, HourKey, Store};

/// Fetches the channel holds at most before more are dropped.
pub(crate) const CHANNEL_CAPACITY: usize = 8192;
const FLUSH_EVERY: Duration = Duration::from_secs(1);
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

/// What the writer has not written yet.
#[derive(Default)]
struct Pending {
    files: HashMap<FileKey, FileFetches>,
    hours: HashMap<HourKey, u64>,
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
            .entry(HourKey {
                site: fetch.site.to_string(),
                crawler: fetch.crawler.name(),
                hour,
            })
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
        self.files.is_empty()
    }
}

/// The request path's end of the ledger.
#[derive(Debug, Clone)]
pub(crate) struct LedgerSender {
    fetches: mpsc::Sender<Fetch>,
    metrics: Arc<Metrics>,
}

impl LedgerSender {
    pub(crate) fn record(&self, fetch: Fetch) {
        if self.fetches.try_send(fetch).is_err() {
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
    let (fetches, received) = mpsc::channel(CHANNEL_CAPACITY);
    let sender = LedgerSender {
        fetches,
        metrics: metrics.clone(),
    };
    let task = tokio::spawn(write(store, received, metrics, stop));
    (sender, task)
}

async fn write(
    store: Store,
    mut received: mpsc::Receiver<Fetch>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut pending = Pending::default();
    let mut flush = tokio::time::interval(FLUSH_EVERY);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            fetch = received.recv() => match fetch {
                Some(fetch) => {
                    metrics.crawler_fetch(&fetch.site, fetch.crawler, fetch.status);
                    pending.add(fetch);
                }
                None => break,
            },
            _ = flush.tick() => write_out(&store, &mut pending).await,
            _ = prune.tick() => {
                if let Err(error) = store.prune_crawler_hours().await {
                    tracing::warn!(%error, "pruning the crawlers' hourly counts failed");
                }
            }
            () = stop.cancelled() => break,
        }
    }
    while let Ok(fetch) = received.try_recv() {
        metrics.crawler_fetch(&fetch.site, fetch.crawler, fetch.status);
        pending.add(fetch);
    }
    write_out(&store, &mut pending).await;
}

/// Writes what is pending; on failure it stays pending (its size bounded
/// by files and crawlers) and the next tick tries again.
async fn write_out(store: &Store, pending: &mut Pending) {
    if pending.is_empty() {
        return;
    }
    let files: Vec<FileFetches> = pending.files.values().cloned().collect();
    let hours: Vec<(HourKey, u64)> = pending
        .hours
        .iter()
        .map(|(key, count)| (key.clone(), *count))
        .collect();
    match store.record_crawler_fetches(&files, &hours).await {
        Ok(()) => *pending = Pending::default(),
        Err(error) => {
            tracing::warn!(%error, files = files.len(), "writing the crawler ledger failed; retrying")
        }
    }
}
