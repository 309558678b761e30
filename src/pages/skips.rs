//! Rows that cannot be served are left out of every sitemap, never allowed
//! to break one. The schema records why (`skip_reason`); this logs each such
//! row once, with its key and reason, so an operator hears of it without a
//! flood on every request.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use crate::quote::{LOGGED_LOC_CHARS, truncated};
use crate::store::{self, SkippedRow, Store, Turn};

/// Skipped rows remembered so each is logged once; past this many, further
/// ones are still counted but logged again after a restart at most.
const SKIP_LOG_MEMORY: usize = 100_000;

/// Rows taken from the database per round.
const BATCH: i64 = 1000;

/// Rows the writer left out, logged once each.
#[derive(Debug, Default)]
pub(crate) struct SkipLog {
    seen: Mutex<HashSet<i64>>,
}

impl SkipLog {
    pub(crate) fn record(&self, site: &str, id: i64, loc: &str, reason: impl std::fmt::Display) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.len() < SKIP_LOG_MEMORY && seen.insert(id) {
            tracing::warn!(site, row_id = id, loc = %truncated(loc, LOGGED_LOC_CHARS), %reason, "row left out of its sitemap");
        }
    }
}

/// Logs every skipped row not logged before; returns them. With
/// [`Turn::Skip`], stops at the first batch a fold holds the turn for:
/// the next round takes what is left.
pub async fn report_new_skips(store: &Store, turn: Turn) -> Result<Vec<SkippedRow>, store::Error> {
    let mut reported = Vec::new();
    loop {
        let Some(batch) = store.take_unreported_skips(BATCH, turn).await? else {
            return Ok(reported);
        };
        for row in &batch {
            tracing::warn!(
                site = %row.site,
                section = %row.section,
                row_id = row.id,
                loc = %truncated(&row.loc, LOGGED_LOC_CHARS),
                reason = %row.reason,
                "row left out of the sitemaps"
            );
        }
        let last = (batch.len() as i64) < BATCH;
        reported.extend(batch);
        if last {
            return Ok(reported);
        }
    }
}

/// Runs [`report_new_skips`] every `interval`, for as long as the service
/// runs. A round never waits for a fold: folds keep pages current, while
/// a skipped row can be logged a round later.
pub(crate) async fn report_periodically(store: Store, interval: Duration) {
    // The first round comes one interval after start, like every other.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match report_new_skips(&store, Turn::Skip).await {
            Ok(rows) if !rows.is_empty() => {
                tracing::info!(rows = rows.len(), "reported rows left out of the sitemaps");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "could not look for skipped rows"),
        }
    }
}
