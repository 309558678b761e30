//! How many rows the service's next fold reads: as many as it places in
//! about `fold_batch_ms`, measured on the folds before it.
//!
//! While a pass places a backlog, what other sites commit is folded between
//! two of its batches (a lane, see migration `fair_folds`), so a batch's
//! length is how long their changes wait. Rows cost very different times
//! (a million rows of one site fold in 5 s, of 100,000 sites in 9 s), so
//! the batch is sized by time, not by a count, within what the rows the
//! last folds placed say fits a fold's memory (`fold_memory_bytes`).

use std::time::Duration;

use crate::store::FIRST_BATCH_ROWS;

/// Fewest rows a batch reads: below it, a fold's own cost outweighs its rows.
const MIN_BATCH_ROWS: u64 = 10_000;

#[derive(Debug, Clone)]
pub(crate) struct Pace {
    target: Duration,
    max_rows: u64,
    rows: u64,
    /// Rows whose placing fits the fold's memory, as the last fold that
    /// placed rows measured it.
    fit: Option<u64>,
}

impl Pace {
    pub(crate) fn new(target: Duration, max_rows: u64) -> Pace {
        Pace {
            target,
            max_rows,
            rows: FIRST_BATCH_ROWS.min(max_rows),
            fit: None,
        }
    }

    /// Rows the next fold may read.
    pub(crate) fn rows(&self) -> u64 {
        self.fit.map_or(self.rows, |fit| self.rows.min(fit.max(1)))
    }

    /// Learns from a fold that read `folded` rows in `took`, of which as
    /// many as `fit` would fit its memory (`None`: it placed none, and
    /// the last that did still says). Folds of fewer rows than a batch's
    /// least say more of a fold's own cost than of its rows', and teach
    /// nothing.
    pub(crate) fn record(&mut self, folded: u64, took: Duration, fit: Option<u64>) {
        if folded < MIN_BATCH_ROWS {
            return;
        }
        if fit.is_some() {
            self.fit = fit;
        }
        if took.is_zero() {
            return;
        }
        let per_second = folded as f64 / took.as_secs_f64();
        let rows = (per_second * self.target.as_secs_f64()) as u64;
        self.rows = rows.clamp(MIN_BATCH_ROWS.min(self.max_rows), self.max_rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_sized_to_the_target_from_the_last_measured_fold() {
        let mut pace = Pace::new(Duration::from_secs(1), 1_000_000);
        assert_eq!(pace.rows(), 100_000);
        pace.record(100_000, Duration::from_millis(500), None);
        assert_eq!(pace.rows(), 200_000);
        pace.record(200_000, Duration::from_secs(4), None);
        assert_eq!(pace.rows(), 50_000);
    }

    #[test]
    fn batches_stay_within_what_fits_the_folds_memory() {
        let mut pace = Pace::new(Duration::from_secs(1), 1_000_000);
        pace.record(100_000, Duration::from_millis(100), Some(150_000));
        assert_eq!(pace.rows(), 150_000, "not the million a second says");
        pace.record(150_000, Duration::from_millis(150), None);
        assert_eq!(pace.rows(), 150_000, "a fold that placed none keeps it");
        pace.record(150_000, Duration::from_millis(300), Some(900_000));
        assert_eq!(pace.rows(), 500_000, "time bounds it again");
    }

    #[test]
    fn small_folds_teach_nothing() {
        let mut pace = Pace::new(Duration::from_secs(1), 1_000_000);
        pace.record(3, Duration::from_millis(20), Some(20));
        pace.record(9_999, Duration::from_secs(10), Some(9_999));
        assert_eq!(pace.rows(), 100_000);
    }

    #[test]
    fn batches_stay_within_the_configured_bounds() {
        let mut pace = Pace::new(Duration::from_secs(1), 300_000);
        pace.record(100_000, Duration::from_millis(10), None);
        assert_eq!(pace.rows(), 300_000, "fold_batch_rows bounds it");
        pace.record(10_000, Duration::from_secs(100), None);
        assert_eq!(pace.rows(), 10_000, "never below the least batch");

        let small = Pace::new(Duration::from_secs(1), 500);
        assert_eq!(small.rows(), 500);
    }
}
