//! A fold's removals, applied to the runs by the service.
//!
//! A row deleted or renamed away leaves a removal (the triggers of
//! `sitemap_urls`). A fold takes a batch of them straight from their
//! `DELETE`, reads the runs over their ids, and takes each member that a
//! removal names (the same id, site and loc hash) out of its run: a run
//! they all leave goes, one they leave partly is written again without
//! them. The 'removed' feed entries and the page deltas are written here
//! too, and `sitemap_fold_begin` is told how many removals were taken
//! (migration `removals_applied_by_the_service`). Removals no run held are
//! left to it in `sitemap_fold_removals`: it takes them off
//! `sitemap_placements`.
//!
//! The schema did all of this in one statement, whose join of every
//! member with the removals, sort and aggregates took about 350 of 600 ms
//! of a fold of 150,000 removals.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use sqlx::{PgConnection, Row};

use super::Error;
use super::binary_copy::CopyIn;
use super::fold::{RUNS, write_entries};

/// Removals that read the runs over their ids rather than look each one
/// up, as `sitemap_run_members` decides it.
const MANY_REMOVALS: usize = 10_000;

/// Removals one fold takes at most, however many rows it may read: the
/// service holds each one until the fold ends, about 150 bytes with its
/// loc and what finds it, so a fold's removals take about 15 MB at most.
const REMOVALS_PER_FOLD: i64 = 100_000;

/// How far into the heap of removals a take that leaves none has come
/// when it asks for a vacuum ([`Store::vacuum_removals_after`]). Taken
/// removals stay as dead tuples until one, and every later take reads the
/// pages behind its cursor to find nothing: 350 ms a fold after a rename of
/// 10M rows (142,762 pages), for each fold that then places the renamed
/// rows. Below this, such a take reads for about 2.5 ms.
///
/// [`Store::vacuum_removals_after`]: super::Store::vacuum_removals_after
const VACUUM_PAST_PAGES: i64 = 1_024;

/// How long after a vacuum that left the heap at [`VACUUM_PAST_PAGES`] or
/// more a take that leaves none asks for the next, at first; each such
/// vacuum doubles it, up to [`MAX_VACUUM_RETRY`]. A vacuum removes no
/// tuple deleted after the oldest snapshot still held, and truncates no
/// page that holds one: a snapshot of the feed's writer, taken before the
/// last take committed, left a 10M-row rename's heap whole, and every take
/// read its 142,762 emptied pages (about 300 ms) until the end.
const FIRST_VACUUM_RETRY: Duration = Duration::from_millis(500);

/// The longest wait between vacuums of a heap a long transaction keeps.
const MAX_VACUUM_RETRY: Duration = Duration::from_secs(60);

/// Runs read at a time from those over many removals' ids: a bulk delete
/// of scattered rows hits most runs it reads, and each is written again.
const RUNS_READ_AT_ONCE: i64 = 2_000;

/// The removals left for `sitemap_fold_begin`, each tuple in this order.
const LEFT: CopyIn =
    CopyIn::new("COPY sitemap_fold_removals (id, site, loc) FROM STDIN (FORMAT binary)");

/// A run as read: its key, where it places its members, its last id, and
/// its members.
type StoredRun = (i64, String, String, i32, i64, Vec<i64>, Vec<i64>, Vec<i32>);

/// Where the last bounded take of removals ended in `sitemap_removals`'
/// heap: the page the next take reads from first, then the pages before it.
/// PostgreSQL starts a scan where the last one stopped only for a table
/// larger than a quarter of `shared_buffers`; below that (any backlog up to
/// tens of millions on a server's usual settings) a take from the first
/// page walked the dead tuples of all the takes before it. Only where to
/// start: a take reads every page, so one that starts anywhere (another
/// replica's fold took removals since, or a fold rolled back) takes what
/// one from the first page would, in another order.
///
/// It also keeps when to vacuum the heap again, if the last vacuum left it
/// large.
#[derive(Debug, Default)]
pub struct RemovalsCursor {
    page: AtomicI64,
    vacuum_retry: Mutex<Option<VacuumRetry>>,
}

/// When a take that leaves none next asks for a vacuum, and how long the
/// wait before it was.
#[derive(Debug, Clone, Copy)]
struct VacuumRetry {
    at: Instant,
    after: Duration,
}

impl RemovalsCursor {
    /// A vacuum left the heap `pages` long. Takes start from the first page
    /// again: it emptied the pages behind the cursor, and writers' removals
    /// fill them next. If it left [`VACUUM_PAST_PAGES`] or more, a take
    /// that leaves none asks for another after a wait, each longer than
    /// the last.
    pub(super) fn vacuumed(&self, pages: i64) {
        self.page.store(0, Ordering::Relaxed);
        let mut retry = self.vacuum_retry.lock().expect("vacuum retry lock");
        *retry = (pages >= VACUUM_PAST_PAGES).then(|| {
            let after = retry.map_or(FIRST_VACUUM_RETRY, |last| {
                (last.after * 2).min(MAX_VACUUM_RETRY)
            });
            VacuumRetry {
                at: Instant::now() + after,
                after,
            }
        });
    }

    /// A take that leaves none asks for a vacuum: it has come past
    /// [`VACUUM_PAST_PAGES`], or the last vacuum left the heap large and
    /// its wait is over.
    fn vacuum_due(&self) -> bool {
        self.page.load(Ordering::Relaxed) >= VACUUM_PAST_PAGES
            || self
                .vacuum_retry
                .lock()
                .expect("vacuum retry lock")
                .is_some_and(|retry| Instant::now() >= retry.at)
    }
}

/// What a fold's take of removals did.
pub(super) struct TakenRemovals {
    /// How many it took.
    pub(super) count: i64,
    /// The bound of the fold's rows for `sitemap_fold_begin`: `count`,
    /// when it took all it may take, so that the fold reads no row and
    /// the next one takes the rest of the removals first.
    pub(super) max_rows: Option<i64>,
    /// It took fewer than it might, so none is left, with the cursor at
    /// [`VACUUM_PAST_PAGES`] or past it (as many pages of taken removals
    /// are behind it), or after a vacuum that left the heap that large.
    pub(super) emptied_a_large_heap: bool,
}

/// Takes removals and applies those whose rows stand in runs, in the
/// fold's transaction, before `sitemap_fold_begin`: at most `max_rows` (all
/// of them when `None`) and [`REMOVALS_PER_FOLD`].
pub(super) async fn take_removals(
    conn: &mut PgConnection,
    max_rows: Option<i64>,
    cursor: &RemovalsCursor,
) -> Result<TakenRemovals, Error> {
    let at_most = max_rows.map(|max_rows| max_rows.min(REMOVALS_PER_FOLD));
    sqlx::query("SELECT sitemap_fold_working_tables()")
        .execute(&mut *conn)
        .await?;
    // Each statement here finds what it wants by a key (as the schema's
    // fold functions, which set this too): planned from the statistics
    // of a table that was empty when last analyzed, the bounded take
    // below scanned every removal for each tuple id it wanted.
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *conn)
        .await?;
    let taken = Taken::read(conn, at_most, cursor).await?;
    if taken.truncated {
        // sitemap_fold_begin empties every page, and drops every run and
        // clamp: the removals taken with the truncation find nothing
        // placed, and only its mark goes to it.
        sqlx::query("INSERT INTO sitemap_fold_removals VALUES (NULL, NULL, NULL)")
            .execute(&mut *conn)
            .await?;
    } else if !taken.ids.is_empty() {
        let removals = Removals::new(&taken);
        let gone = removals.take_from_runs(conn).await?;
        let mut left = vec![true; taken.ids.len()];
        for &(_, removal) in &gone.members {
            removals.mark_taken(removal, &mut left);
        }
        gone.write(conn, &taken).await?;
        // A removed row's lastmod clamp goes with it
        // (sitemap_fold_forget_clamps finds it by the removals left),
        // wherever the row stood.
        let clamps: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sitemap_lastmod_clamps)")
                .fetch_one(&mut *conn)
                .await?;
        if clamps {
            left.fill(true);
        }
        leave_to_the_schema(conn, &taken, &left).await?;
    }
    sqlx::query("SET LOCAL enable_seqscan = DEFAULT")
        .execute(&mut *conn)
        .await?;
    let left_none = at_most.is_some_and(|at_most| taken.count < at_most);
    let took_all = at_most.is_some() && !left_none;
    Ok(TakenRemovals {
        count: taken.count,
        max_rows: if took_all {
            Some(taken.count)
        } else {
            max_rows
        },
        emptied_a_large_heap: left_none && cursor.vacuum_due(),
    })
}

/// The removals a fold took, in the order taken, but a truncation's mark.
/// Held by column, each site once and the locs in one string: a fold may
/// take [`REMOVALS_PER_FOLD`].
#[derive(Default)]
struct Taken {
    /// How many were taken, the mark included.
    count: i64,
    /// A truncation's mark was among them.
    truncated: bool,
    ids: Vec<i64>,
    /// Each one's site, in `sites`.
    site_of: Vec<u32>,
    sites: Vec<String>,
    site_keys: HashMap<String, u32>,
    locs: String,
    /// Where each one's loc ends in `locs`.
    loc_ends: Vec<usize>,
    loc_hashes: Vec<i64>,
}

impl Taken {
    /// Deletes at most `max_rows` removals (all when `None`) and reads them;
    /// a bounded take reads from `cursor` on, and moves it.
    async fn read(
        conn: &mut PgConnection,
        max_rows: Option<i64>,
        cursor: &RemovalsCursor,
    ) -> Result<Taken, Error> {
        let from = cursor.page.load(Ordering::Relaxed);
        // By their tuple ids when bounded: a bounded take without an
        // index, which would cost every deleting writer an insert per row.
        // The pages from the cursor on, then those before it, each in
        // order: a range of tuple ids is read as one.
        let statement = match max_rows {
            None => sqlx::query(
                "DELETE FROM sitemap_removals RETURNING id, site, loc, sitemap_loc_hash(loc), NULL::int8",
            ),
            Some(max_rows) => sqlx::query(
                "WITH picked AS MATERIALIZED (
                     SELECT ARRAY(
                         (SELECT ctid FROM sitemap_removals WHERE ctid >= format('(%s,0)', $2)::tid LIMIT $1)
                         UNION ALL
                         (SELECT ctid FROM sitemap_removals WHERE ctid < format('(%s,0)', $2)::tid LIMIT $1)
                         LIMIT $1) AS ctids
                 )
                 DELETE FROM sitemap_removals
                 WHERE ctid = ANY ((SELECT ctids FROM picked)::tid[])
                 RETURNING id, site, loc, sitemap_loc_hash(loc),
                     (SELECT (ctids[cardinality(ctids)]::text::point)[0]::int8 FROM picked)",
            )
            .bind(max_rows)
            .bind(from),
        };
        // Sized for a full batch up front: grown as the rows come, each
        // column would be copied at every doubling, and held twice
        // meanwhile.
        let expected = usize::try_from(max_rows.unwrap_or(0)).unwrap_or(0);
        let mut taken = Taken {
            ids: Vec::with_capacity(expected),
            site_of: Vec::with_capacity(expected),
            loc_ends: Vec::with_capacity(expected),
            loc_hashes: Vec::with_capacity(expected),
            ..Taken::default()
        };
        // the page a bounded take ended on, the same in every row: its last
        // tuple id picked, in the order the two ranges were read (computed
        // once, not a tuple id turned into text for each row)
        let mut ended_on = None;
        let mut rows = statement.fetch(&mut *conn);
        while let Some(row) = rows.try_next().await? {
            taken.count += 1;
            ended_on = row.try_get::<Option<i64>, _>(4)?;
            // The triggers write an id, site and loc for every removal, and
            // none of them for a truncation's mark.
            let (Some(id), Some(site), Some(loc), Some(loc_hash)) = (
                row.try_get::<Option<i64>, _>(0)?,
                row.try_get::<Option<&str>, _>(1)?,
                row.try_get::<Option<&str>, _>(2)?,
                row.try_get::<Option<i64>, _>(3)?,
            ) else {
                taken.truncated = true;
                continue;
            };
            let site = match taken.site_keys.get(site) {
                Some(&key) => key,
                None => {
                    let key = u32::try_from(taken.sites.len()).expect("sites fit in u32");
                    taken.sites.push(site.to_owned());
                    taken.site_keys.insert(site.to_owned(), key);
                    key
                }
            };
            taken.ids.push(id);
            taken.site_of.push(site);
            taken.locs.push_str(loc);
            taken.loc_ends.push(taken.locs.len());
            taken.loc_hashes.push(loc_hash);
        }
        if let Some(page) = ended_on {
            cursor.page.store(page, Ordering::Relaxed);
        }
        Ok(taken)
    }

    fn site(&self, removal: usize) -> &str {
        &self.sites[self.site_of[removal] as usize]
    }

    fn loc(&self, removal: usize) -> &str {
        let start = removal
            .checked_sub(1)
            .map_or(0, |before| self.loc_ends[before]);
        &self.locs[start..self.loc_ends[removal]]
    }
}

/// The removals taken, found by id.
struct Removals<'t> {
    taken: &'t Taken,
    /// A removal's id to the first removal of it, in `taken`.
    first: HashMap<i64, usize>,
    /// The next removal of the same id (a URL renamed away twice has two).
    next: Vec<Option<usize>>,
}

impl<'t> Removals<'t> {
    fn new(taken: &'t Taken) -> Removals<'t> {
        let mut first = HashMap::with_capacity(taken.ids.len());
        let mut next = vec![None; taken.ids.len()];
        for (i, &id) in taken.ids.iter().enumerate().rev() {
            next[i] = first.insert(id, i);
        }
        Removals { taken, first, next }
    }

    /// The removal naming the member `id` of a run of the site `site` (in
    /// `Taken::sites`) with `loc_hash`, if one does.
    fn naming(&self, id: i64, site: u32, loc_hash: i64) -> Option<usize> {
        let mut at = self.first.get(&id).copied();
        while let Some(i) = at {
            if self.taken.site_of[i] == site && self.taken.loc_hashes[i] == loc_hash {
                return Some(i);
            }
            at = self.next[i];
        }
        None
    }

    /// Marks `removal`, and every other removal of the same URL, as
    /// applied here.
    fn mark_taken(&self, removal: usize, left: &mut [bool]) {
        let taken = self.taken;
        let mut at = self.first.get(&taken.ids[removal]).copied();
        while let Some(i) = at {
            if taken.site_of[i] == taken.site_of[removal]
                && taken.loc_hashes[i] == taken.loc_hashes[removal]
            {
                left[i] = false;
            }
            at = self.next[i];
        }
    }

    /// Takes the members the removals name out of their runs. Few removals
    /// find their runs by id, one probe each; many read the runs over their
    /// ids, a bounded number at a time.
    async fn take_from_runs(&self, conn: &mut PgConnection) -> Result<Gone, Error> {
        let mut gone = Gone::default();
        if self.first.len() <= MANY_REMOVALS {
            let ids: Vec<i64> = self.first.keys().copied().collect();
            let runs: Vec<StoredRun> = sqlx::query_as(
                "SELECT run, site, section, page, last_id, ids, loc_hashes, bytes
                 FROM sitemap_placement_runs
                 WHERE run = ANY (ARRAY(SELECT DISTINCT run FROM sitemap_run_members($1)))",
            )
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await?;
            self.take_out(conn, &runs, &mut gone).await?;
            return Ok(gone);
        }
        let lowest = self.first.keys().min().copied().expect("removals");
        let highest = self.first.keys().max().copied().expect("removals");
        // Runs written again end at or before the last one read: the next
        // read, after it, does not find them. The read stops at the highest
        // id, so it never walks the runs past the removals.
        let mut after = lowest - 1;
        loop {
            let runs: Vec<StoredRun> = sqlx::query_as(
                "SELECT run, site, section, page, last_id, ids, loc_hashes, bytes
                 FROM sitemap_placement_runs
                 WHERE last_id > $1 AND last_id <= $2
                 ORDER BY last_id LIMIT $3",
            )
            .bind(after)
            .bind(highest)
            .bind(RUNS_READ_AT_ONCE)
            .fetch_all(&mut *conn)
            .await?;
            self.take_out(conn, &runs, &mut gone).await?;
            match runs.last() {
                Some(run) if runs.len() as i64 == RUNS_READ_AT_ONCE => after = run.4,
                _ => break,
            }
        }
        // the runs that hold the highest id but end past it, which the read
        // above stops before
        let spanning: Vec<StoredRun> = sqlx::query_as(
            "SELECT run, site, section, page, last_id, ids, loc_hashes, bytes
             FROM sitemap_placement_runs
             WHERE int8range(first_id, last_id, '[]') @> $1::bigint AND last_id > $1",
        )
        .bind(highest)
        .fetch_all(&mut *conn)
        .await?;
        self.take_out(conn, &spanning, &mut gone).await?;
        Ok(gone)
    }

    /// Takes the members the removals name out of `runs`: deletes each run
    /// one leaves, writes again those it leaves partly, and notes what went
    /// in `gone`.
    async fn take_out(
        &self,
        conn: &mut PgConnection,
        runs: &[StoredRun],
        gone: &mut Gone,
    ) -> Result<(), Error> {
        let mut left_runs = Vec::new();
        // each run hit, and the members it keeps
        let mut rewritten: Vec<(&StoredRun, Vec<usize>)> = Vec::new();
        for stored in runs {
            let (run, site, section, page, _, ids, loc_hashes, bytes) = stored;
            // none of the removals is of its site
            let Some(&site_key) = self.taken.site_keys.get(site) else {
                continue;
            };
            let mut keeps = Vec::new();
            // URLs and bytes the run's page loses
            let (mut urls, mut page_bytes) = (0, 0);
            for (member, (&id, &loc_hash)) in ids.iter().zip(loc_hashes).enumerate() {
                match self.naming(id, site_key, loc_hash) {
                    Some(removal) => {
                        gone.members.push((id, removal));
                        urls += 1;
                        page_bytes += i64::from(bytes[member]);
                    }
                    None => keeps.push(member),
                }
            }
            if urls > 0 {
                let page = gone.pages.entry((site.clone(), section.clone(), *page));
                let (page_urls, page_total) = page.or_default();
                *page_urls += urls;
                *page_total += page_bytes;
                left_runs.push(*run);
                if !keeps.is_empty() {
                    // in the order of their ids, as the schema wrote them again
                    keeps.sort_unstable_by_key(|&member| ids[member]);
                    rewritten.push((stored, keeps));
                }
            }
        }
        if left_runs.is_empty() {
            return Ok(());
        }
        sqlx::query("DELETE FROM sitemap_placement_runs WHERE run = ANY ($1)")
            .bind(&left_runs)
            .execute(&mut *conn)
            .await?;
        if rewritten.is_empty() {
            return Ok(());
        }
        let mut copy = RUNS.open(conn).await?;
        for ((_, site, section, page, _, ids, loc_hashes, bytes), keeps) in &rewritten {
            copy.rows()
                .tuple()
                .text(site)
                .text(section)
                .int4(*page)
                .int8(ids[keeps[0]])
                .int8(ids[keeps[keeps.len() - 1]])
                .int8_array(keeps.iter().map(|&member| ids[member]))
                .int8_array(keeps.iter().map(|&member| loc_hashes[member]))
                .int4_array(keeps.iter().map(|&member| bytes[member]));
            copy.flush().await?;
        }
        copy.finish().await?;
        Ok(())
    }
}

/// What the removals took out of the runs.
#[derive(Default)]
struct Gone {
    /// Each member taken, and the removal that named it.
    members: Vec<(i64, usize)>,
    /// URLs and bytes taken off each page, by site, section and page.
    pages: HashMap<(String, String, i32), (i64, i64)>,
}

impl Gone {
    /// Writes the 'removed' feed entries, in the order of the rows' ids,
    /// and the page deltas, for `sitemap_fold_end` to apply. Many removals
    /// keep their entries, as many rows read do (`sitemap_fold_begin`).
    async fn write(mut self, conn: &mut PgConnection, taken: &Taken) -> Result<(), Error> {
        if self.members.is_empty() {
            return Ok(());
        }
        let (stashing, seen): (bool, time::OffsetDateTime) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM sitemap_change_stash) OR $1 >= 10000, clock_timestamp()",
        )
        .bind(taken.count)
        .fetch_one(&mut *conn)
        .await?;
        self.members.sort_unstable_by_key(|&(id, _)| id);
        let members = &self.members;
        write_entries(conn, "removed", seen, stashing, members.len(), |i| {
            let (id, removal) = members[i];
            (taken.site(removal), taken.loc(removal), id)
        })
        .await?;
        let mut sites = Vec::with_capacity(self.pages.len());
        let mut sections = Vec::with_capacity(self.pages.len());
        let mut pages = Vec::with_capacity(self.pages.len());
        let mut urls = Vec::with_capacity(self.pages.len());
        let mut bytes = Vec::with_capacity(self.pages.len());
        for ((site, section, page), (page_urls, page_bytes)) in self.pages {
            sites.push(site);
            sections.push(section);
            pages.push(page);
            urls.push(page_urls);
            bytes.push(page_bytes);
        }
        sqlx::query(
            "INSERT INTO sitemap_fold_page_deltas
             SELECT site, section, page, -urls, -bytes, 0, 0, 0, urls, false
             FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[], $5::int8[])
                 AS d(site, section, page, urls, bytes)",
        )
        .bind(&sites)
        .bind(&sections)
        .bind(&pages)
        .bind(&urls)
        .bind(&bytes)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// Writes the removals marked `left` to `sitemap_fold_removals`, for
/// `sitemap_fold_begin`; analyzed when many, as it does its own.
async fn leave_to_the_schema(
    conn: &mut PgConnection,
    taken: &Taken,
    left: &[bool],
) -> Result<(), Error> {
    let count = left.iter().filter(|&&left| left).count();
    if count == 0 {
        return Ok(());
    }
    let mut copy = LEFT.open(conn).await?;
    for removal in (0..left.len()).filter(|&removal| left[removal]) {
        copy.rows()
            .tuple()
            .int8(taken.ids[removal])
            .text(taken.site(removal))
            .text(taken.loc(removal));
        copy.flush().await?;
    }
    copy.finish().await?;
    if count > MANY_REMOVALS {
        sqlx::query("ANALYZE sitemap_fold_removals")
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
