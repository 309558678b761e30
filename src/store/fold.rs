//! Folding committed changes into pages, and pruning the change feed.
//!
//! Applications' transactions only mark what they change (see the migration
//! `placement_in_the_service`); `sitemap_fold()` in the schema does the
//! placing. This runs it the one way it is correct: in a REPEATABLE READ
//! transaction that locks `sitemap_fold_state` before its first query, so
//! folds from any number of replicas take turns and each reads with a
//! snapshot newer than the last. A pass over what committed between two
//! snapshots may take several folds, each reading a bounded batch (migration
//! `fold_in_bounded_batches`): a bulk load shows as it is placed, and no
//! fold holds a transaction or temporary files for the whole of it.
//!
//! A fold of many rows keeps its feed entries as arrays of locs instead of
//! writing an entry each (migration `bulk_folds`); [`Store::write_out_feed`]
//! writes them out, in order, on a connection of its own, so that the next
//! fold does not wait for them.

use std::time::Duration;

use super::{Error, Store};

/// Whether a fold waits for one already running elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Wait for it, then fold what is left: a write that must show at once.
    Wait,
    /// Leave it to the fold running: the periodic round.
    Skip,
}

/// How many rows of kept feed entries (at most 10,000 entries each) one
/// transaction writes out.
const WRITE_OUT_ROWS: i32 = 50;

/// What one fold transaction did.
struct FoldBatch {
    folded: u64,
    /// It began a pass: its snapshot is newer than any commit before it.
    began_a_pass: bool,
    /// Its pass is done and no row waits to be placed again.
    caught_up: bool,
}

/// What a fold may leave of the feed.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub max_age: Duration,
    pub max_rows: u64,
}

impl Store {
    /// Folds committed changes into pages and summaries, and lists the
    /// news sitemaps anew when rows changed or an article is due to leave
    /// the window. Each fold is one transaction that reads at most
    /// `fold_batch_rows` changed rows: [`Turn::Skip`] runs one, the
    /// periodic round; [`Turn::Wait`] runs them until every change
    /// committed before the call is placed. Returns how many rows it
    /// placed, changed in place or took off a page; `None` when `turn` is
    /// [`Turn::Skip`] and another fold holds the turn.
    pub async fn fold(&self, turn: Turn) -> Result<Option<u64>, Error> {
        let mut folded = 0;
        // A pass under way may have begun before the caller's commit: the
        // caller's changes are in the first pass that begins after it.
        let mut began_a_pass = false;
        loop {
            let Some(batch) = self.fold_batch(turn).await? else {
                return Ok(None);
            };
            folded += batch.folded;
            began_a_pass |= batch.began_a_pass;
            if turn == Turn::Skip {
                return Ok(Some(folded));
            }
            if began_a_pass && batch.caught_up {
                // What was folded is in the feed too when this returns.
                self.write_out_feed(Turn::Wait).await?;
                return Ok(Some(folded));
            }
        }
    }

    /// Writes the feed entries folds kept out to `sitemap_changes`, oldest
    /// first, in transactions of [`WRITE_OUT_ROWS`] kept rows, until none
    /// is left. One writer at a time: [`Turn::Skip`] leaves it to one
    /// already writing (`None`), [`Turn::Wait`] waits for it and writes
    /// what is left. Returns how many entries it wrote.
    pub async fn write_out_feed(&self, turn: Turn) -> Result<Option<u64>, Error> {
        let mut written = 0;
        loop {
            let mut tx = self.pool.begin().await?;
            let lock = match turn {
                Turn::Wait => "SELECT true FROM sitemap_feed_writer FOR UPDATE",
                Turn::Skip => "SELECT true FROM sitemap_feed_writer FOR UPDATE SKIP LOCKED",
            };
            if sqlx::query_scalar::<_, bool>(lock)
                .fetch_optional(&mut *tx)
                .await?
                .is_none()
            {
                return Ok(None);
            }
            let entries: i64 = sqlx::query_scalar("SELECT sitemap_write_out_feed($1)")
                .bind(WRITE_OUT_ROWS)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            if entries == 0 {
                return Ok(Some(written));
            }
            written += u64::try_from(entries).unwrap_or(0);
        }
    }

    async fn fold_batch(&self, turn: Turn) -> Result<Option<FoldBatch>, Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .execute(&mut *tx)
            .await?;
        if !take_turn(&mut tx, turn).await? {
            return Ok(None);
        }
        // A batch's sorts stay in memory, and compiling the plans (their
        // estimates look huge) costs more than it saves (measured on
        // 200,000 new rows: 8.9 s with both as they default, 5.9 s without).
        for setting in ["SET LOCAL work_mem = '64MB'", "SET LOCAL jit = off"] {
            sqlx::query(setting).execute(&mut *tx).await?;
        }
        let (folded, began_a_pass, caught_up): (i64, bool, bool) =
            sqlx::query_as("SELECT folded, started, caught_up FROM sitemap_fold($1)")
                .bind(i64::try_from(self.fold_batch_rows).unwrap_or(i64::MAX))
                .fetch_one(&mut *tx)
                .await?;
        // The news window moves with the time as well as with the rows.
        sqlx::query("SELECT sitemap_refresh_news($1, $2)")
            .bind(self.clock.now())
            .bind(folded > 0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(FoldBatch {
            folded: u64::try_from(folded).unwrap_or(0),
            began_a_pass,
            caught_up,
        }))
    }

    /// Whether folds are placing a backlog larger than one of them reads:
    /// a pass of several folds is under way.
    pub async fn placing_a_backlog(&self) -> Result<bool, Error> {
        Ok(
            sqlx::query_scalar("SELECT folding_through IS NOT NULL FROM sitemap_fold_state")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Deletes feed entries older than the retention, and the oldest past
    /// its row cap. Returns how many went. Folds append entries in order,
    /// so what goes is everything before one `seq`: the first entry young
    /// enough to keep, or the first of the newest `max_rows`, whichever is
    /// later. Both are found from an end of the primary key, so a round
    /// with nothing to prune reads a few index pages, not the feed (a
    /// 10M-entry feed took 5.7 s to scan, every minute).
    pub async fn prune_changes(&self, retention: Retention) -> Result<u64, Error> {
        let (first_young, end): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT seq FROM sitemap_changes
                     WHERE committed_at >= now() - make_interval(secs => $1)
                     ORDER BY seq LIMIT 1),
                    (SELECT max(seq) + 1 FROM sitemap_changes)",
        )
        .bind(retention.max_age.as_secs_f64())
        .fetch_one(&self.pool)
        .await?;
        let Some(end) = end else {
            return Ok(0);
        };
        let max_rows = i64::try_from(retention.max_rows).unwrap_or(i64::MAX);
        let keep_from = first_young.unwrap_or(end).max(end.saturating_sub(max_rows));
        Ok(sqlx::query("DELETE FROM sitemap_changes WHERE seq < $1")
            .bind(keep_from)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    /// Vacuums the feed when its pruned entries outnumber a fifth of those
    /// kept (autovacuum's default rule, read from the same statistics), so
    /// that folds write new entries into the space pruning freed. Returns
    /// whether it vacuumed. Where autovacuum is off or behind, the feed
    /// grew by every entry ever written: a 100M-row backfill left 13 GB
    /// for a bound of 10M entries. One that finds the feed being vacuumed
    /// already leaves it.
    pub async fn reclaim_feed_space(&self) -> Result<bool, Error> {
        let due: bool = sqlx::query_scalar(
            "SELECT n_dead_tup > 50 + n_live_tup / 5 FROM pg_stat_user_tables
             WHERE relid = 'sitemap_changes'::regclass",
        )
        .fetch_one(&self.pool)
        .await?;
        if due {
            // VACUUM runs outside a transaction: a simple query, not a
            // prepared statement.
            sqlx::raw_sql("VACUUM (SKIP_LOCKED) sitemap_changes")
                .execute(&self.pool)
                .await?;
        }
        Ok(due)
    }
}

/// Locks `sitemap_fold_state` for this transaction, before any query takes
/// its snapshot; false when `turn` is [`Turn::Skip`] and it is taken.
pub(super) async fn take_turn(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    turn: Turn,
) -> Result<bool, Error> {
    let lock = match turn {
        Turn::Wait => {
            // A fold of a bulk load takes a while; a lock that stays
            // taken longer than this is a stuck session, reported as such.
            sqlx::query("SET LOCAL lock_timeout = '60s'")
                .execute(&mut **tx)
                .await?;
            "LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE"
        }
        Turn::Skip => "LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE NOWAIT",
    };
    match sqlx::query(lock).execute(&mut **tx).await {
        Ok(_) => Ok(true),
        // lock_not_available
        Err(sqlx::Error::Database(e))
            if turn == Turn::Skip && e.code().as_deref() == Some("55P03") =>
        {
            Ok(false)
        }
        Err(error) => Err(error.into()),
    }
}
