//! The fold loop: places what applications committed into pages, a few
//! times a second, for as long as the service runs.
//!
//! Every replica runs it. Folds take turns in the database, and a round that
//! finds another replica folding skips its turn, so one folds at a time and,
//! when it dies (its connection closes, its lock goes with it), the next
//! round of any other takes over. A fold is one transaction: one killed
//! midway leaves nothing behind, and the next one starts where the last
//! committed fold ended.
//!
//! A fold that leaves a backlog (a pass under way, or rows to place again)
//! is followed by the next at once, each sized by [`Pace`]; the interval is
//! for the rounds that find little.
//!
//! The same loop writes out the feed entries that folds of many rows kept,
//! and keeps the change feed bounded: it prunes what is past the retention
//! and vacuums the feed when pruning has left enough dead entries, so their
//! space is written again even where autovacuum is off. Both run beside the
//! folds, each on a connection of its own, so the next fold goes on
//! meanwhile. After a fold that took the last of a large heap of removals,
//! it vacuums them before the next fold (see `Store::vacuum_removals_after`).

use std::time::Duration;

use super::pace::Pace;
use crate::store::{Retention, Store, Turn};

/// How often the feed is pruned, at most.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// How long to wait after a failed fold before the next try, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What the loop needs.
#[derive(Debug, Clone)]
pub(crate) struct Folder {
    pub(crate) store: Store,
    pub(crate) interval: Duration,
    /// About how long a fold of a backlog takes (`fold_batch_ms`).
    pub(crate) batch_time: Duration,
    /// Most rows a fold reads (`fold_batch_rows`).
    pub(crate) batch_rows: u64,
    pub(crate) retention: Retention,
}

impl Folder {
    /// Folds every `interval` until aborted.
    pub(crate) async fn run(self) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_prune: Option<tokio::time::Instant> = None;
        let mut pruning: Option<tokio::task::JoinHandle<()>> = None;
        let mut writing_out: Option<tokio::task::JoinHandle<()>> = None;
        let mut backoff = self.interval;
        let mut pace = Pace::new(self.batch_time, self.batch_rows);
        let mut backlog = false;
        loop {
            if !backlog {
                ticker.tick().await;
            }
            let started = tokio::time::Instant::now();
            match self.store.fold_once(pace.rows()).await {
                Ok(Some(batch)) => {
                    backoff = self.interval;
                    backlog = !batch.caught_up;
                    pace.record(batch.folded, started.elapsed(), batch.rows_that_fit);
                    if batch.folded > 0 {
                        tracing::debug!(rows = batch.folded, "folded changes into pages");
                    }
                    self.store.vacuum_removals_after(&batch).await;
                }
                Ok(None) => backlog = false,
                Err(error) => {
                    backlog = false;
                    tracing::warn!(%error, "could not fold changes into pages");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
            if writing_out.as_ref().is_none_or(|task| task.is_finished()) {
                let store = self.store.clone();
                writing_out = Some(tokio::spawn(async move {
                    match store.write_out_feed(Turn::Skip).await {
                        Ok(Some(0) | None) => {}
                        Ok(Some(entries)) => {
                            tracing::debug!(entries, "wrote kept entries out to the change feed")
                        }
                        Err(error) => {
                            tracing::warn!(%error, "could not write kept entries out to the change feed")
                        }
                    }
                }));
            }
            // Apart from the folds: a bulk change past the feed's cap
            // leaves millions of entries to prune and vacuum (pruning 9.4M
            // took 10 s, the vacuum after it 10 s more), and a prune that
            // waits on a lock would hold every fold back with it.
            if last_prune.is_none_or(|at| at.elapsed() >= PRUNE_EVERY)
                && pruning.as_ref().is_none_or(|task| task.is_finished())
            {
                last_prune = Some(tokio::time::Instant::now());
                pruning = Some(tokio::spawn(keep_the_feed_bounded(
                    self.store.clone(),
                    self.retention,
                )));
            }
        }
    }
}

/// Prunes the feed past its retention, then vacuums it if pruning left
/// enough dead entries.
async fn keep_the_feed_bounded(store: Store, retention: Retention) {
    match store.prune_changes(retention).await {
        Ok(0) => {}
        Ok(pruned) => tracing::debug!(rows = pruned, "pruned the change feed"),
        Err(error) => tracing::warn!(%error, "could not prune the change feed"),
    }
    let began = tokio::time::Instant::now();
    match store.reclaim_feed_space().await {
        Ok(true) => tracing::debug!(took = ?began.elapsed(), "vacuumed the change feed"),
        Ok(false) => {}
        Err(error) => tracing::warn!(%error, "could not vacuum the change feed"),
    }
}
