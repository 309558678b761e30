//! Folding committed changes into pages, and pruning the change feed.
//!
//! Applications' transactions only mark what they change (see the migration
//! `placement_in_the_service`); a fold places it, the schema's functions and
//! this module together ([`fold_in`]: the service numbers the rows it
//! places). This runs a fold the one way it is correct: in a REPEATABLE READ
//! transaction that locks `sitemap_fold_state` before its first query, so
//! folds from any number of replicas take turns and each reads with a
//! snapshot newer than the last. A pass over what committed between two
//! snapshots may take several folds, each reading a bounded batch (migration
//! `fold_in_bounded_batches`) and taking a bounded batch of removals
//! (`removals_in_batches`): a bulk load, delete or rename shows as it is
//! placed, and no fold holds a transaction or temporary files for the whole
//! of it.
//!
//! A fold of many rows keeps its feed entries as arrays of locs instead of
//! writing an entry each (migration `bulk_folds`); [`Store::write_out_feed`]
//! writes them out, in order, on a connection of its own, so that the next
//! fold does not wait for them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use sqlx::PgConnection;

use super::binary_copy::{self, CopyIn};
use super::numbering::{self, Limits, Numbered, PageGain, Run, Tail, Unplaced};
use super::removals::{self, RemovalsCursor};
use super::robots::{self, ROBOTS_DISALLOWED, SiteJudge, Verdict};
use super::turn::HeldTurn;
use super::{Error, Store};
use crate::sitemap::writer::entry_bytes;

/// Whether a fold waits for one already running elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Wait for it, then fold what is left: a write that must show at once.
    Wait,
    /// Leave it to the fold running: the periodic round.
    Skip,
}

/// How many kept feed entries one transaction writes out, at most (a kept
/// row holds up to 10,000; one is written whole however many it holds).
const WRITE_OUT_ENTRIES: i32 = 100_000;

/// The first fold of a backlog reads at most this many changed rows,
/// before one measured what its rows take and how fast it placed them:
/// well within what fits `fold_memory_bytes` by default, of rows of about
/// a 50-byte loc.
pub(crate) const FIRST_BATCH_ROWS: u64 = 100_000;

/// What one fold did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldBatch {
    /// Rows it placed, changed in place or took off a page.
    pub folded: u64,
    /// How many changed rows the next fold may read and hold no more than
    /// its memory bound of the rows it places, if they cost what this one's
    /// did (room to grow included); `None` when this one placed none.
    pub rows_that_fit: Option<u64>,
    /// It began a pass: its snapshot is newer than any commit before it.
    pub began_a_pass: bool,
    /// Its pass is done, no removal is left and no row waits to be placed
    /// again.
    pub caught_up: bool,
    /// It took the last removals from a heap so large that every later
    /// take would read its dead pages for nothing:
    /// [`Store::vacuum_removals_after`] vacuums it.
    pub emptied_a_large_heap_of_removals: bool,
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
        let folded = self.fold_batches(turn, |_, _| {}).await?;
        if turn == Turn::Wait && folded.is_some() {
            // What was folded is in the feed too when this returns.
            self.write_out_feed(Turn::Wait).await?;
        }
        Ok(folded)
    }

    /// The folds of [`Store::fold`], without writing out the feed entries
    /// they keep; `on_batch` hears of each fold and how long it took.
    pub async fn fold_batches(
        &self,
        turn: Turn,
        mut on_batch: impl FnMut(&FoldBatch, Duration),
    ) -> Result<Option<u64>, Error> {
        let mut folded = 0;
        // A pass under way may have begun before the caller's commit: the
        // caller's changes are in the first pass that begins after it.
        let mut began_a_pass = false;
        let mut max_rows = FIRST_BATCH_ROWS.min(self.fold_batch_rows);
        loop {
            let started = Instant::now();
            let Some(batch) = self.fold_batch(turn, max_rows).await? else {
                return Ok(None);
            };
            if let Some(fit) = batch.rows_that_fit {
                max_rows = fit.min(self.fold_batch_rows);
            }
            on_batch(&batch, started.elapsed());
            self.vacuum_removals_after(&batch).await;
            folded += batch.folded;
            began_a_pass |= batch.began_a_pass;
            if turn == Turn::Skip || (began_a_pass && batch.caught_up) {
                return Ok(Some(folded));
            }
        }
    }

    /// Writes the feed entries folds kept out to `sitemap_changes`, oldest
    /// first, in transactions of at most [`WRITE_OUT_ENTRIES`] entries,
    /// each going on after the last kept row the one before wrote (not
    /// stepping again over the rows it deleted), until none is left. One writer at a time: [`Turn::Skip`] leaves it to one
    /// already writing (`None`), [`Turn::Wait`] waits for it and writes
    /// what is left. Returns how many entries it wrote.
    pub async fn write_out_feed(&self, turn: Turn) -> Result<Option<u64>, Error> {
        let mut written = 0;
        let mut after_id = 0_i64;
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
            let (entries, through_id): (i64, Option<i64>) =
                sqlx::query_as("SELECT * FROM sitemap_write_out_feed($1, $2)")
                    .bind(after_id)
                    .bind(WRITE_OUT_ENTRIES)
                    .fetch_one(&mut *tx)
                    .await?;
            tx.commit().await?;
            let Some(through_id) = through_id else {
                return Ok(Some(written));
            };
            after_id = through_id;
            written += u64::try_from(entries).unwrap_or(0);
        }
    }

    /// Vacuums `sitemap_removals` when `batch` emptied a large heap of
    /// them ([`FoldBatch::emptied_a_large_heap_of_removals`]), in a turn of
    /// its own (waiting for a fold running elsewhere), so that no fold
    /// holds the lock its truncation needs: the emptied pages go, and later
    /// takes read none. Where autovacuum is off or has yet to come round,
    /// every take read them all. The truncation locks the table, as
    /// autovacuum's does, while it finds the empty pages, and gives way
    /// within 20 ms to a writer that waits for it. A vacuum that leaves the
    /// heap large (a snapshot older than the last take was held) is run
    /// again after later folds (`RemovalsCursor::vacuumed`). A failure is
    /// logged, not returned: the folds it follows are committed, and the
    /// next large heap emptied asks again.
    pub(crate) async fn vacuum_removals_after(&self, batch: &FoldBatch) {
        if !batch.emptied_a_large_heap_of_removals {
            return;
        }
        let started = Instant::now();
        match self.vacuum_removals_in_a_turn().await {
            Ok(pages_left) => tracing::debug!(
                took = ?started.elapsed(),
                ?pages_left,
                "vacuumed the removals folds took"
            ),
            Err(error) => tracing::warn!(%error, "could not vacuum the removals folds took"),
        }
    }

    /// The vacuum, and the pages it left in the heap (`None`: the turn was
    /// not taken, which waiting for it never leaves).
    async fn vacuum_removals_in_a_turn(&self) -> Result<Option<i64>, Error> {
        let Some(mut held) = HeldTurn::take(&self.pool, Turn::Wait).await? else {
            return Ok(None);
        };
        // VACUUM runs outside a transaction: a simple query, not a
        // prepared statement.
        sqlx::raw_sql("VACUUM (SKIP_LOCKED) sitemap_removals")
            .execute(held.connection())
            .await?;
        let pages: i64 = sqlx::query_scalar(
            "SELECT pg_relation_size('sitemap_removals') / current_setting('block_size')::int8",
        )
        .fetch_one(held.connection())
        .await?;
        self.removals_cursor.vacuumed(pages);
        held.release().await?;
        Ok(Some(pages))
    }

    /// One fold, as the service's loop runs them: of at most `max_rows`
    /// changed rows (and `fold_batch_rows`); `None` when another fold holds
    /// the turn. Its feed entries are left kept for the loop's writer, and
    /// the vacuum it may ask for to the loop
    /// ([`Store::vacuum_removals_after`]), outside its time.
    pub(crate) async fn fold_once(&self, max_rows: u64) -> Result<Option<FoldBatch>, Error> {
        self.fold_batch(Turn::Skip, max_rows.min(self.fold_batch_rows))
            .await
    }

    /// One fold transaction, of at most `max_rows` changed rows; `None`
    /// when `turn` is [`Turn::Skip`] and another fold holds the turn.
    async fn fold_batch(&self, turn: Turn, max_rows: u64) -> Result<Option<FoldBatch>, Error> {
        let Some(mut held) = HeldTurn::take(&self.pool, turn).await? else {
            return Ok(None);
        };
        let mut tx = held.begin(true).await?;
        let batch = fold_in(
            &mut tx,
            Some(i64::try_from(max_rows.max(1)).unwrap_or(i64::MAX)),
            self.fold_memory_bytes,
            &self.removals_cursor,
        )
        .await?;
        // The news window moves with the time as well as with the rows.
        sqlx::query("SELECT sitemap_refresh_news($1, $2)")
            .bind(self.clock.now())
            .bind(batch.folded > 0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        held.release().await?;
        Ok(Some(batch))
    }

    /// Whether folds are placing a backlog larger than one of them reads:
    /// a pass of several folds is under way, or removals are left.
    pub async fn placing_a_backlog(&self) -> Result<bool, Error> {
        Ok(sqlx::query_scalar(
            "SELECT folding_through IS NOT NULL OR removals_left FROM sitemap_fold_state",
        )
        .fetch_one(&self.pool)
        .await?)
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
    ///
    /// A vacuum removes no entry pruned after the oldest snapshot or
    /// transaction still open began, so while one is (a bulk `UPDATE`, a
    /// dump), the feed stays due after its vacuum. It is not vacuumed again
    /// until that horizon has moved on: through a 15-minute `UPDATE` of 10M
    /// rows, the feed was vacuumed 14 times, for nothing.
    pub async fn reclaim_feed_space(&self) -> Result<bool, Error> {
        if !self.feed_vacuum_due().await? {
            *self.feed_vacuum_held_at.lock().expect("feed vacuum lock") = None;
            return Ok(false);
        }
        let horizon = self.oldest_open_horizon().await?;
        let held_at = self
            .feed_vacuum_held_at
            .lock()
            .expect("feed vacuum lock")
            .clone();
        if held_at.as_ref() == Some(&horizon) {
            return Ok(false);
        }
        // VACUUM runs outside a transaction: a simple query, not a
        // prepared statement.
        sqlx::raw_sql("VACUUM (SKIP_LOCKED) sitemap_changes")
            .execute(&self.pool)
            .await?;
        let still_due = self.feed_vacuum_due().await?;
        *self.feed_vacuum_held_at.lock().expect("feed vacuum lock") = still_due.then_some(horizon);
        Ok(true)
    }

    async fn feed_vacuum_due(&self) -> Result<bool, Error> {
        Ok(sqlx::query_scalar(
            "SELECT n_dead_tup > 50 + n_live_tup / 5 FROM pg_stat_user_tables
             WHERE relid = 'sitemap_changes'::regclass",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// The horizon a vacuum of this database keeps deleted rows for: the
    /// oldest of its sessions' snapshots and transactions, the standbys'
    /// and replication slots' horizons, and prepared transactions. Sessions
    /// this role may not see are left out, so at worst the horizon seems to
    /// move when it has not, and the feed is vacuumed as it would be
    /// without it.
    async fn oldest_open_horizon(&self) -> Result<String, Error> {
        Ok(sqlx::query_scalar(
            "SELECT horizon::text FROM (
                 SELECT backend_xmin AS horizon FROM pg_stat_activity
                 WHERE datname = current_database()
                 UNION ALL SELECT backend_xid FROM pg_stat_activity
                 WHERE datname = current_database()
                 UNION ALL SELECT backend_xmin FROM pg_stat_replication
                 UNION ALL SELECT xmin FROM pg_replication_slots
                 UNION ALL SELECT transaction FROM pg_prepared_xacts
             ) horizons
             WHERE horizon IS NOT NULL
             ORDER BY age(horizon) DESC
             LIMIT 1",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}

/// Runs one fold on `conn`, reading at most `max_rows` changed rows (all
/// of them when `None`), in the transaction the caller began: REPEATABLE
/// READ, with `sitemap_fold_state` locked before its first query. One fold
/// a transaction; the caller commits it. When the rows it places would
/// hold more than `memory_bytes` in the service, it rolls back to its start
/// (a savepoint) and folds fewer: its snapshot is the same, so what it
/// reads is the start of the same batch. A fold that reads no more rows
/// than a lane ([`LANE_ROWS`]) is never refused: a lane is not bounded by
/// `max_rows`, and its rows are few.
///
/// The schema does all of a fold but the removals from runs and placing
/// the rows left to place (migrations `numbering_in_the_service` and
/// `removals_applied_by_the_service`): [`removals`] takes the removals and
/// applies those in runs, `sitemap_fold_begin` the rest, reads the batch
/// and applies what changed, this reads the rows left to place in one
/// binary `COPY` (unless `sitemap_fold_begin` says none is left), numbers
/// them ([`numbering`]) and writes their feed entries, runs and placements
/// back the same way, and `sitemap_fold_end` sums up.
pub async fn fold_in(
    conn: &mut PgConnection,
    mut max_rows: Option<i64>,
    memory_bytes: u64,
    removals_cursor: &RemovalsCursor,
) -> Result<FoldBatch, Error> {
    loop {
        sqlx::query("SAVEPOINT fold").execute(&mut *conn).await?;
        match fold_within(conn, max_rows, memory_bytes, removals_cursor).await? {
            Ok(batch) => {
                sqlx::query("RELEASE SAVEPOINT fold")
                    .execute(&mut *conn)
                    .await?;
                return Ok(batch);
            }
            Err(TooMany { fit }) => {
                sqlx::query("ROLLBACK TO SAVEPOINT fold")
                    .execute(&mut *conn)
                    .await?;
                tracing::debug!(
                    max_rows = fit,
                    "a fold's rows would hold too much memory: folding fewer"
                );
                max_rows = Some(fit);
            }
        }
    }
}

/// A fold whose rows to place would hold more than its bound: `fit`
/// changed rows at most hold less, as far as those it read tell.
struct TooMany {
    fit: i64,
}

/// [`fold_in`]'s one try: the batch, or what it should read instead.
async fn fold_within(
    conn: &mut PgConnection,
    max_rows: Option<i64>,
    memory_bytes: u64,
    removals_cursor: &RemovalsCursor,
) -> Result<Result<FoldBatch, TooMany>, Error> {
    // A batch's sorts stay in memory, and compiling the plans (their
    // estimates look huge) costs more than it saves (measured on 200,000
    // new rows: 8.9 s with both as they default, 5.9 s without). The
    // batch's working tables are analyzed from a sample of 3,000 rows, not
    // 30,000: enough for their joins' plans, and a fold of 150,000 rows
    // analyzed in 18 ms instead of 66–83. All three for this transaction
    // only, in one round trip.
    sqlx::query(
        "SELECT set_config('work_mem', '64MB', true), set_config('jit', 'off', true),
                set_config('default_statistics_target', '10', true)",
    )
    .execute(&mut *conn)
    .await?;
    // Sites created or moved since the last fold: their rows left out, or
    // no longer under their base URL, are placed again by this one.
    sqlx::query("SELECT sitemap_apply_site_changes()")
        .execute(&mut *conn)
        .await?;
    robots::judge_changed_sites(conn).await?;
    sqlx::query("SELECT sitemap_apply_audit_changes()")
        .execute(&mut *conn)
        .await?;
    // Rows whose visibility window opened or closed since the last fold.
    sqlx::query("SELECT sitemap_fold_windows()")
        .execute(&mut *conn)
        .await?;
    let removals = removals::take_removals(conn, max_rows, removals_cursor).await?;
    let (began_a_pass, nothing_to_place): (bool, bool) =
        sqlx::query_as("SELECT started, nothing_to_place FROM sitemap_fold_begin($1, $2)")
            .bind(removals.max_rows)
            .bind(removals.count)
            .fetch_one(&mut *conn)
            .await?;
    sqlx::query("SELECT sitemap_fold_forget_clamps()")
        .execute(&mut *conn)
        .await?;
    sqlx::query("SELECT sitemap_fold_hide_kept()")
        .execute(&mut *conn)
        .await?;
    let judges = robots::fold_judges(conn).await?;
    sqlx::query("SELECT sitemap_fold_audit_sites()")
        .execute(&mut *conn)
        .await?;
    let mut unplaced = if nothing_to_place {
        UnplacedRows::default()
    } else {
        match read_unplaced(conn, &judges, memory_bytes).await? {
            Ok(unplaced) => unplaced,
            Err(too_many) => return Ok(Err(too_many)),
        }
    };
    let used_bytes = unplaced.used_bytes();
    let limits = limits(conn).await?;
    let tails = tails(conn, &unplaced.sections).await?;
    announce_added(conn, &unplaced).await?;

    let numbered: Vec<Numbered> = unplaced
        .sections
        .iter_mut()
        .zip(tails)
        .map(|(section, tail)| numbering::number_section(&mut section.rows, tail, limits))
        .collect();
    let mut gains = PageGains::default();
    for (section, numbered) in unplaced.sections.iter().zip(&numbered) {
        for gain in &numbered.pages {
            gains.add(section, gain);
        }
    }
    copy_runs(conn, &unplaced.sections, &numbered).await?;
    copy_placements(conn, &unplaced, &numbered).await?;
    gains.insert(conn).await?;
    sqlx::query("SELECT sitemap_fold_clamp_lastmods()")
        .execute(&mut *conn)
        .await?;

    let (folded, caught_up): (i64, bool) =
        sqlx::query_as("SELECT folded, caught_up FROM sitemap_fold_end()")
            .fetch_one(&mut *conn)
            .await?;
    let folded = u64::try_from(folded).unwrap_or(0);
    // a vector grown by doubling has room for up to twice what it holds
    let rows_that_fit = (used_bytes > 0).then(|| rows_within(folded, memory_bytes, 2 * used_bytes));
    Ok(Ok(FoldBatch {
        folded,
        rows_that_fit,
        began_a_pass,
        caught_up,
        emptied_a_large_heap_of_removals: removals.emptied_a_large_heap,
    }))
}

/// The feed entries of a fold that writes them itself, each tuple in this
/// order.
const CHANGES: CopyIn = CopyIn::new(
    "COPY sitemap_changes (site, loc, change, committed_at) FROM STDIN (FORMAT binary)",
);

/// The feed entries of a fold that keeps them for the feed's writer, each
/// tuple in this order.
const STASH: CopyIn = CopyIn::new(
    "COPY sitemap_change_stash (site, change, committed_at, locs) FROM STDIN (FORMAT binary)",
);

/// Entries a site's kept row holds, at most, when it has more than this:
/// its rows are kept by blocks of this many ids.
const STASH_BLOCK: i64 = 10_000;

/// Writes the `added` feed entries of the rows placed (see
/// [`AddedEntries`]), before their placements, stamped with the fold's
/// time, with the fold's other entries: to the feed, or kept for its
/// writer, as `sitemap_fold_begin` decided for the whole fold.
///
/// The service has every loc at hand from its read of the rows to place;
/// grouped in SQL, they were read again, hashed twice and aggregated: 100
/// of 110 ms for 80,000 new rows.
async fn announce_added(conn: &mut PgConnection, unplaced: &UnplacedRows) -> Result<(), Error> {
    let added = &unplaced.added;
    if added.entries.is_empty() {
        return Ok(());
    }
    let (stashing, seen): (bool, time::OffsetDateTime) =
        sqlx::query_as("SELECT stashing, seen FROM sitemap_fold_pass")
            .fetch_one(&mut *conn)
            .await?;
    write_entries(conn, "added", seen, stashing, added.entries.len(), |i| {
        let entry = &added.entries[i];
        (
            unplaced.sections[entry.section].site.as_str(),
            added.loc(i),
            entry.id,
        )
    })
    .await
}

/// Writes `count` feed entries of one `change`, stamped `seen`; `entry`
/// gives each one's site, loc and row id. They go to the feed, or, when
/// `stashing`, are kept for its writer: a row per site, or per
/// [`STASH_BLOCK`] ids for a site with more, in the order of their lowest
/// ids, each listing its locs in the order given.
pub(super) async fn write_entries<'e>(
    conn: &mut PgConnection,
    change: &str,
    seen: time::OffsetDateTime,
    stashing: bool,
    count: usize,
    entry: impl Fn(usize) -> (&'e str, &'e str, i64),
) -> Result<(), Error> {
    if !stashing {
        let mut copy = CHANGES.open(conn).await?;
        for i in 0..count {
            let (site, loc, _) = entry(i);
            copy.rows()
                .tuple()
                .text(site)
                .text(loc)
                .text(change)
                .timestamptz(seen);
            copy.flush().await?;
        }
        copy.finish().await?;
        return Ok(());
    }

    let mut per_site: HashMap<&str, i64> = HashMap::new();
    for i in 0..count {
        *per_site.entry(entry(i).0).or_default() += 1;
    }
    // a site, and its block of ids when it has many, to its lowest id and
    // its entries
    let mut blocks = HashMap::new();
    for i in 0..count {
        let (site, _, id) = entry(i);
        let block = (per_site[site] > STASH_BLOCK).then_some(id / STASH_BLOCK);
        let (lowest, members) = blocks.entry((site, block)).or_insert((id, Vec::new()));
        *lowest = (*lowest).min(id);
        members.push(i);
    }
    let mut kept: Vec<(i64, &str, Vec<usize>)> = blocks
        .into_iter()
        .map(|((site, _), (lowest, members))| (lowest, site, members))
        .collect();
    kept.sort_unstable_by_key(|&(lowest, ..)| lowest);
    let mut copy = STASH.open(conn).await?;
    for (_, site, members) in &kept {
        copy.rows()
            .tuple()
            .text(site)
            .text(change)
            .timestamptz(seen)
            .text_array(members.iter().map(|&i| entry(i).1));
        copy.flush().await?;
    }
    copy.finish().await?;
    Ok(())
}

/// The runs a fold writes, each tuple in this order.
pub(super) const RUNS: CopyIn = CopyIn::new(
    "COPY sitemap_placement_runs (site, section, page, first_id, last_id, ids, loc_hashes, bytes)
     FROM STDIN (FORMAT binary)",
);

/// The placements of rows placed alone or left out, each tuple in this
/// order; [`Placement::write`] writes one.
const PLACEMENTS: CopyIn = CopyIn::new(
    "COPY sitemap_placements (id, site, section, loc_hash, page, bytes, skip_reason,
                              images, videos, alternates, cluster, robots_rule)
     FROM STDIN (FORMAT binary)",
);

/// A row of `sitemap_placements`, in the order [`PLACEMENTS`] lists its
/// columns.
struct Placement<'a> {
    id: i64,
    site: &'a str,
    section: &'a str,
    loc_hash: i64,
    /// Its page, or why it is left out.
    place: Result<i32, &'a str>,
    /// bytes, images, videos and alternates (none for a row left out)
    sizes: [i32; 4],
    cluster: Option<&'a str>,
    /// The robots.txt rule that disallows it, if one does.
    robots_rule: Option<&'a str>,
}

impl Placement<'_> {
    fn write(&self, rows: &mut binary_copy::Writer) {
        let [bytes, images, videos, alternates] = self.sizes;
        rows.tuple()
            .int8(self.id)
            .text(self.site)
            .text(self.section)
            .int8(self.loc_hash)
            .optional_int4(self.place.ok())
            .int4(bytes)
            .optional_text(self.place.err())
            .int4(images)
            .int4(videos)
            .int4(alternates)
            .optional_text(self.cluster)
            .optional_text(self.robots_rule);
    }
}

/// A section's rows to place, as `sitemap_fold_unplaced` gives them.
struct SectionRows {
    site: String,
    section: String,
    rows: Vec<Unplaced>,
    /// The clusters of the rows that have one, by id.
    clusters: HashMap<i64, String>,
    /// The robots.txt rules of the rows listed though disallowed (their
    /// site reports them), by id.
    robots_rules: HashMap<i64, String>,
}

/// The `added` feed entries of the rows a fold places, in the order it
/// read them: every row it places but those placed again (a configuration
/// change, or a page outgrown), which are not news.
#[derive(Default)]
struct AddedEntries {
    entries: Vec<Added>,
    /// The entries' locs, one after another.
    locs: String,
}

struct Added {
    /// Its section's index in [`UnplacedRows::sections`].
    section: usize,
    id: i64,
    /// Where its loc ends in [`AddedEntries::locs`].
    loc_end: usize,
}

impl AddedEntries {
    fn push(&mut self, section: usize, id: i64, loc: &str) {
        self.locs.push_str(loc);
        self.entries.push(Added {
            section,
            id,
            loc_end: self.locs.len(),
        });
    }

    fn loc(&self, entry: usize) -> &str {
        let start = entry
            .checked_sub(1)
            .map_or(0, |before| self.entries[before].loc_end);
        &self.locs[start..self.entries[entry].loc_end]
    }
}

/// A row the fold leaves out, and why.
struct Skipped {
    id: i64,
    /// Its section's index in [`UnplacedRows::sections`].
    section: usize,
    loc_hash: i64,
    skip_reason: String,
    cluster: Option<String>,
    robots_rule: Option<String>,
}

#[derive(Default)]
struct UnplacedRows {
    sections: Vec<SectionRows>,
    skipped: Vec<Skipped>,
    added: AddedEntries,
    /// Bytes of the strings and map entries above that their vectors'
    /// capacities do not count.
    owned_bytes: usize,
}

/// What an entry of a map the fold holds costs beside its strings, about.
const MAP_ENTRY_BYTES: usize = 64;

impl UnplacedRows {
    fn skip(&mut self, row: Skipped) {
        self.owned_bytes += row.skip_reason.len()
            + row.cluster.as_ref().map_or(0, String::len)
            + row.robots_rule.as_ref().map_or(0, String::len);
        self.skipped.push(row);
    }

    /// About what it holds: what its vectors have room for, and the strings
    /// and map entries they own.
    fn room_bytes(&self) -> u64 {
        self.bytes(|_, capacity| capacity)
    }

    /// What its rows take of that: growing by doubling, its vectors have
    /// room for up to twice as many.
    fn used_bytes(&self) -> u64 {
        self.bytes(|len, _| len)
    }

    /// Its bytes, each vector's counted as `count` says from its length and
    /// capacity.
    fn bytes(&self, count: fn(usize, usize) -> usize) -> u64 {
        let added = &self.added;
        let vectors = [
            shape(&self.sections),
            shape(&self.skipped),
            shape(&added.entries),
            (added.locs.len(), added.locs.capacity(), 1),
        ];
        let rows = self.sections.iter().map(|section| shape(&section.rows));
        let held: usize = vectors
            .into_iter()
            .chain(rows)
            .map(|(len, capacity, size)| count(len, capacity) * size)
            .sum();
        u64::try_from(held + self.owned_bytes).unwrap_or(u64::MAX)
    }
}

/// A vector's length, capacity and size of an element.
fn shape<T>(vector: &Vec<T>) -> (usize, usize, usize) {
    (vector.len(), vector.capacity(), size_of::<T>())
}

/// Rows a lane reads at most (migration `fair_folds`): a fold that reads
/// no more is never refused for its memory, which a bound of `max_rows`
/// would not lessen.
const LANE_ROWS: u64 = 10_000;

/// How often, in rows read, a fold's read weighs what it holds.
const WEIGH_EVERY: u64 = 4096;

/// Whether `unplaced`, `read` rows so far, holds more than `at_most`; if
/// so, how many rows would fit, with a quarter to spare for rows that cost
/// more than those read.
fn too_much(unplaced: &UnplacedRows, read: u64, at_most: u64) -> Option<TooMany> {
    let held = unplaced.room_bytes();
    (read > LANE_ROWS && held > at_most).then(|| TooMany {
        fit: i64::try_from(rows_within(read, at_most / 4 * 3, held)).unwrap_or(i64::MAX),
    })
}

/// Of `rows` that take `bytes`, how many take no more than `bound`, at
/// least one.
fn rows_within(rows: u64, bound: u64, bytes: u64) -> u64 {
    let fit = u128::from(rows) * u128::from(bound) / u128::from(bytes);
    u64::try_from(fit).unwrap_or(u64::MAX).max(1)
}

/// Reads `sitemap_fold_unplaced` in one binary `COPY`, by section, judges
/// the locs of the sites in `judges`, and keeps the `added` feed entries of
/// the rows it places; stops, with how many changed rows would fit, once
/// what it holds passes `at_most` bytes.
async fn read_unplaced(
    conn: &mut PgConnection,
    judges: &HashMap<String, SiteJudge>,
    at_most: u64,
) -> Result<Result<UnplacedRows, TooMany>, Error> {
    // The view's check for a placement is a probe of the primary key per
    // row that may have one; priced as it is, a million of them plan as a
    // hash of every placement (as in the schema's fold functions). Without
    // seq scans, the small tables it joins (sites, judged and audited)
    // were merged in key order, which sorted every row read by its site:
    // they are hashed instead.
    for setting in [
        "SET LOCAL enable_seqscan = off",
        "SET LOCAL enable_mergejoin = off",
    ] {
        sqlx::query(setting).execute(&mut *conn).await?;
    }
    let mut unplaced = UnplacedRows::default();
    // site, then section, to the index of its rows
    let mut keys: HashMap<String, HashMap<String, usize>> = HashMap::new();
    let mut reader = binary_copy::Reader::default();
    let mut read: u64 = 0;
    let mut stream = conn
        .copy_out_raw(
            // A NULL costs the stream no call of a type's send function:
            // counts of none are sent as NULL.
            //
            // Windows and audit findings are rare: each is looked up per
            // row only when its table holds a row at all, which is asked
            // once (an init plan). Joined, they and the sites with a
            // robots judge were an index probe per row each: 105 of 220 ms
            // for 80,000 new rows. Every loc is read, for the feed's
            // entries and the robots judges.
            "COPY (SELECT u.id, u.site, u.section, u.loc_hash, u.bytes, nullif(u.images, 0),
                          nullif(u.videos, 0), nullif(u.alternates, 0), u.cluster,
                          coalesce(u.skip_reason,
                                   CASE WHEN (SELECT EXISTS (SELECT 1 FROM sitemap_urls
                                                             WHERE visible_from IS NOT NULL
                                                                OR visible_until IS NOT NULL)) THEN
                                       (SELECT sitemap_window_reason(w.visible_from, w.visible_until, now())
                                        FROM sitemap_urls w
                                        -- through the windows' partial indexes
                                        WHERE w.id = u.id
                                          AND (w.visible_from IS NOT NULL OR w.visible_until IS NOT NULL))
                                   END,
                                   -- the sites that leave audit findings out
                                   CASE WHEN (SELECT EXISTS (SELECT 1 FROM sitemap_fold_audited)) THEN
                                       (SELECT 'audit: ' || a.finding
                                        FROM sitemap_fold_audited k
                                        JOIN sitemap_audits a ON a.finding = ANY (k.leave_out)
                                        WHERE k.site = u.site AND a.id = u.id AND a.loc = u.loc)
                                   END),
                          u.loc, u.replaced, u.loc_sized
                   FROM sitemap_fold_unplaced u) TO STDOUT (FORMAT binary)",
        )
        .await?;
    let mut too_many = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        // The rest of a stream is read to its end (the connection is of
        // no use before), and dropped.
        if too_many.is_some() {
            continue;
        }
        reader.push(&chunk);
        while let Some(tuple) = reader.next_tuple()? {
            read += 1;
            if read.is_multiple_of(WEIGH_EVERY) {
                too_many = too_much(&unplaced, read, at_most);
                if too_many.is_some() {
                    unplaced = UnplacedRows::default();
                    break;
                }
            }
            let id = tuple.int8("id")?;
            let site = tuple.str("site")?;
            let section = tuple.str("section")?;
            let key = match keys.get(site).and_then(|sections| sections.get(section)) {
                Some(&key) => key,
                None => {
                    let key = unplaced.sections.len();
                    unplaced.owned_bytes += 2 * (MAP_ENTRY_BYTES + site.len() + section.len());
                    keys.entry(site.to_owned())
                        .or_default()
                        .insert(section.to_owned(), key);
                    unplaced.sections.push(SectionRows {
                        site: site.to_owned(),
                        section: section.to_owned(),
                        rows: Vec::new(),
                        clusters: HashMap::new(),
                        robots_rules: HashMap::new(),
                    });
                    key
                }
            };
            let loc_hash = tuple.int8("loc_hash")?;
            let bytes = tuple.int4("bytes")?;
            let images = tuple.optional_int4("images")?.unwrap_or(0);
            let videos = tuple.optional_int4("videos")?.unwrap_or(0);
            let alternates = tuple.optional_int4("alternates")?.unwrap_or(0);
            let cluster = tuple.optional_str("cluster")?.map(str::to_owned);
            if let Some(skip_reason) = tuple.optional_str("skip_reason")? {
                unplaced.skip(Skipped {
                    id,
                    section: key,
                    loc_hash,
                    skip_reason: skip_reason.to_owned(),
                    cluster,
                    robots_rule: None,
                });
                continue;
            }
            let loc = tuple.str("loc")?;
            let replaced = tuple.bool("replaced")?;
            // A new row's loc is sized here, by the rule the schema's
            // `sitemap_entry_bytes` holds to: the fold's read left it out.
            let bytes = if tuple.bool("loc_sized")? {
                bytes
            } else {
                // the view leaves out an entry over the page budget, which
                // an `integer` holds
                i32::try_from(entry_bytes(loc))
                    .ok()
                    .and_then(|loc_bytes| bytes.checked_add(loc_bytes))
                    .ok_or_else(|| {
                        binary_copy::malformed(format!(
                            "row {id}: its entry's size is past an integer"
                        ))
                    })?
            };
            let verdict = match judges.get(site) {
                Some(judge) => judge.verdict(loc),
                None => Verdict::Allowed,
            };
            let reported = match verdict {
                Verdict::Allowed => None,
                Verdict::Reported(rule) => Some(rule),
                Verdict::LeftOut(rule) => {
                    unplaced.skip(Skipped {
                        id,
                        section: key,
                        loc_hash,
                        skip_reason: ROBOTS_DISALLOWED.to_owned(),
                        cluster,
                        robots_rule: Some(rule),
                    });
                    continue;
                }
            };
            let section = &mut unplaced.sections[key];
            // A reported row stands alone, where its rule is kept.
            let plain = images == 0
                && videos == 0
                && alternates == 0
                && cluster.is_none()
                && reported.is_none();
            if let Some(rule) = reported {
                unplaced.owned_bytes += MAP_ENTRY_BYTES + rule.len();
                section.robots_rules.insert(id, rule);
            }
            if let Some(cluster) = cluster {
                unplaced.owned_bytes += MAP_ENTRY_BYTES + cluster.len();
                section.clusters.insert(id, cluster);
            }
            section.rows.push(Unplaced {
                id,
                loc_hash,
                bytes,
                images,
                videos,
                alternates,
                plain,
            });
            if !replaced {
                unplaced.added.push(key, id, loc);
            }
        }
    }
    drop(stream);
    if let Some(too_many) = too_many.or_else(|| too_much(&unplaced, read, at_most)) {
        return Ok(Err(too_many));
    }
    reader.finish()?;
    sqlx::query("SET LOCAL enable_seqscan = DEFAULT")
        .execute(&mut *conn)
        .await?;
    Ok(Ok(unplaced))
}

async fn limits(conn: &mut PgConnection) -> Result<Limits, Error> {
    let (max_urls, entry_budget): (i64, i64) =
        sqlx::query_as("SELECT max_urls::bigint, entry_budget FROM sitemap_settings")
            .fetch_one(&mut *conn)
            .await?;
    Ok(Limits {
        max_urls,
        entry_budget,
    })
}

/// Each section's last page, if it has one, in the order of `sections`.
async fn tails(
    conn: &mut PgConnection,
    sections: &[SectionRows],
) -> Result<Vec<Option<Tail>>, Error> {
    let sites: Vec<&str> = sections.iter().map(|s| s.site.as_str()).collect();
    let names: Vec<&str> = sections.iter().map(|s| s.section.as_str()).collect();
    let found: Vec<(i32, i32, i64, i64)> = sqlx::query_as(
        "SELECT t.n::integer, p.page, p.url_count::bigint, p.bytes
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(site, section, n)
         CROSS JOIN LATERAL (SELECT page, url_count, bytes FROM sitemap_pages p
                             WHERE p.site = t.site AND p.section = t.section
                             ORDER BY p.page DESC LIMIT 1) p",
    )
    .bind(&sites)
    .bind(&names)
    .fetch_all(&mut *conn)
    .await?;
    let mut tails = vec![None; sections.len()];
    for (n, page, url_count, bytes) in found {
        let slot = usize::try_from(n - 1).expect("ordinals count from 1");
        tails[slot] = Some(Tail {
            page,
            url_count,
            bytes,
        });
    }
    Ok(tails)
}

/// What each page gains from the rows placed, as columns for
/// `sitemap_fold_page_deltas`.
#[derive(Default)]
struct PageGains {
    sites: Vec<String>,
    sections: Vec<String>,
    pages: Vec<i32>,
    url_counts: Vec<i64>,
    bytes: Vec<i64>,
    images: Vec<i64>,
    videos: Vec<i64>,
    alternates: Vec<i64>,
}

impl PageGains {
    fn add(&mut self, section: &SectionRows, gain: &PageGain) {
        self.sites.push(section.site.clone());
        self.sections.push(section.section.clone());
        self.pages.push(gain.page);
        self.url_counts.push(gain.url_count);
        self.bytes.push(gain.bytes);
        self.images.push(gain.images);
        self.videos.push(gain.videos);
        self.alternates.push(gain.alternates);
    }

    async fn insert(self, conn: &mut PgConnection) -> Result<(), Error> {
        if self.pages.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO sitemap_fold_page_deltas
             SELECT site, section, page, url_count, bytes, images, videos, alternates, url_count, false
             FROM unnest($1::text[], $2::text[], $3::integer[], $4::bigint[], $5::bigint[],
                         $6::bigint[], $7::bigint[], $8::bigint[])
                  AS d(site, section, page, url_count, bytes, images, videos, alternates)",
        )
        .bind(self.sites)
        .bind(self.sections)
        .bind(self.pages)
        .bind(self.url_counts)
        .bind(self.bytes)
        .bind(self.images)
        .bind(self.videos)
        .bind(self.alternates)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// Writes the runs of every section with [`RUNS`], sent a chunk at a time
/// as they are written.
async fn copy_runs(
    conn: &mut PgConnection,
    sections: &[SectionRows],
    numbered: &[Numbered],
) -> Result<(), Error> {
    if numbered.iter().all(|numbered| numbered.runs.is_empty()) {
        return Ok(());
    }
    let mut copy = RUNS.open(conn).await?;
    for (section, numbered) in sections.iter().zip(numbered) {
        for run in &numbered.runs {
            write_run(copy.rows(), section, run);
            copy.flush().await?;
        }
    }
    copy.finish().await?;
    Ok(())
}

fn write_run(out: &mut binary_copy::Writer, section: &SectionRows, run: &Run) {
    let members = run.members(&section.rows);
    let first = members.clone().next().expect("a run has a row");
    let last = members.clone().last().expect("a run has a row");
    out.tuple()
        .text(&section.site)
        .text(&section.section)
        .int4(run.page)
        .int8(first.id)
        .int8(last.id)
        .int8_array(members.clone().map(|row| row.id))
        .int8_array(members.clone().map(|row| row.loc_hash))
        .int4_array(members.map(|row| row.bytes));
}

/// Writes the placements of the rows placed alone, then of those left out,
/// with [`PLACEMENTS`], sent a chunk at a time as they are written.
async fn copy_placements(
    conn: &mut PgConnection,
    unplaced: &UnplacedRows,
    numbered: &[Numbered],
) -> Result<(), Error> {
    if unplaced.skipped.is_empty() && numbered.iter().all(|numbered| numbered.alone.is_empty()) {
        return Ok(());
    }
    let mut copy = PLACEMENTS.open(conn).await?;
    for (section, numbered) in unplaced.sections.iter().zip(numbered) {
        for &(i, page) in &numbered.alone {
            let row = &section.rows[i];
            Placement {
                id: row.id,
                site: &section.site,
                section: &section.section,
                loc_hash: row.loc_hash,
                place: Ok(page),
                sizes: [row.bytes, row.images, row.videos, row.alternates],
                cluster: section.clusters.get(&row.id).map(String::as_str),
                robots_rule: section.robots_rules.get(&row.id).map(String::as_str),
            }
            .write(copy.rows());
            copy.flush().await?;
        }
    }
    for row in &unplaced.skipped {
        let section = &unplaced.sections[row.section];
        Placement {
            id: row.id,
            site: &section.site,
            section: &section.section,
            loc_hash: row.loc_hash,
            place: Err(&row.skip_reason),
            sizes: [0; 4],
            cluster: row.cluster.as_deref(),
            robots_rule: row.robots_rule.as_deref(),
        }
        .write(copy.rows());
        copy.flush().await?;
    }
    copy.finish().await?;
    Ok(())
}
