//! Bulk writes in one transaction: records copied into a staging table,
//! then applied set-based, for `sitemapd import` and the write API alike.

use futures_util::{Stream, StreamExt};
use sqlx::Postgres;

use super::{Error, Store};

/// What an import did (or, rolled back, would have done) to the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportCounts {
    pub inserted: u64,
    pub updated: u64,
    /// Records identical to their row: nothing written, no lastmod moved.
    pub unchanged: u64,
    /// Rows `--replace` removed because the file no longer has them.
    pub deleted: u64,
}

/// The columns an import's rows may leave NULL, in the order its rows
/// hold them (after site, loc, the record's number and section). None of
/// them has a default.
const OPTIONAL_COLUMNS: [&str; 10] = [
    "lastmod",
    "changefreq",
    "priority",
    "images",
    "videos",
    "news",
    "hreflang",
    "hreflang_cluster",
    "visible_from",
    "visible_until",
];

/// Which optional columns an import's rows fill. A `COPY` names those
/// alone: a column it leaves out is NULL, and PostgreSQL reads no field
/// for it (a load of 1M rows with 7 NULL fields each took 3–5% longer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Filled(u16);

impl Filled {
    /// Every optional column.
    pub(crate) const ALL: Filled = Filled((1 << OPTIONAL_COLUMNS.len()) - 1);

    /// These columns and the `index`th optional one.
    pub(crate) fn with(self, index: usize) -> Filled {
        Filled(self.0 | (1 << index))
    }

    pub(crate) fn union(self, other: Filled) -> Filled {
        Filled(self.0 | other.0)
    }

    /// Whether the `index`th optional column is filled.
    pub(crate) fn has(self, index: usize) -> bool {
        self.0 & (1 << index) != 0
    }

    /// `, name` for each filled column, in order.
    fn column_list(self) -> String {
        OPTIONAL_COLUMNS
            .iter()
            .enumerate()
            .filter(|(index, _)| self.has(*index))
            .map(|(_, name)| format!(", {name}"))
            .collect()
    }
}

/// One import's transaction: rows are copied into a staging table, then
/// applied in one statement. Dropping it unapplied rolls everything back.
///
/// Rows come in key order, `(site, loc)`, with one row per key (see
/// `ingest::sort`): the statements keep that order into the INSERT, so the
/// `(site, loc)` index is filled front to back rather than at random
/// (measured on 1M new rows: 10 s instead of 17).
#[derive(Debug)]
pub(crate) struct ImportSession {
    tx: sqlx::Transaction<'static, Postgres>,
    staged: u64,
}

impl Store {
    /// Whether `sitemap_urls` has no row of any of `sites`: an import into
    /// them can only add rows.
    pub(crate) async fn holds_no_rows_of(&self, sites: &[&str]) -> Result<bool, Error> {
        Ok(sqlx::query_scalar(
            "SELECT NOT EXISTS (SELECT 1 FROM sitemap_urls WHERE site = ANY($1))",
        )
        .bind(sites)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Starts an import: a transaction holding an empty staging table.
    pub(crate) async fn begin_import(&self) -> Result<ImportSession, Error> {
        let mut session = ImportSession {
            tx: self.pool.begin().await?,
            staged: 0,
        };
        session
            .run(&[
                // Hashes and the materialised rows stay in memory, up to a point.
                "SET LOCAL work_mem = '64MB'",
                // Compiling these row-at-a-time statements costs more than it saves.
                "SET LOCAL jit = off",
                "CREATE TEMP TABLE import_rows (
                     site text NOT NULL,
                     loc text NOT NULL,
                     ord bigint NOT NULL,
                     section text NOT NULL,
                     lastmod timestamptz,
                     changefreq text,
                     priority real,
                     images jsonb,
                     videos jsonb,
                     news jsonb,
                     hreflang text[],
                     hreflang_cluster text,
                     visible_from timestamptz,
                     visible_until timestamptz
                 ) ON COMMIT DROP",
            ])
            .await?;
        Ok(session)
    }
}

impl ImportSession {
    /// Runs statements that take no parameters, in order.
    async fn run(&mut self, statements: &[&'static str]) -> Result<(), Error> {
        for statement in statements {
            sqlx::query(*statement).execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    /// Copies batches of rows, in `COPY` text format, into the staging
    /// table (site, loc, ord, section, then the optional columns `filled`
    /// names), in one `COPY`: a statement per batch cost 25 ms each.
    pub(crate) async fn copy(
        &mut self,
        filled: Filled,
        batches: impl Stream<Item = Vec<u8>>,
    ) -> Result<(), Error> {
        let statement = format!(
            "COPY import_rows (site, loc, ord, section{}) FROM STDIN",
            filled.column_list()
        );
        let mut copy = self.tx.copy_in_raw(&statement).await?;
        let mut batches = std::pin::pin!(batches);
        while let Some(rows) = batches.next().await {
            copy.send(rows).await?;
        }
        self.staged += copy.finish().await?;
        Ok(())
    }

    /// Copies rows of a first load (the staging columns without `ord`)
    /// straight into `sitemap_urls`, in one `COPY`; returns how many. A row
    /// whose key exists fails it, and the transaction with it (see
    /// [`Error::is_unique_violation`]).
    pub(crate) async fn copy_new(
        &mut self,
        filled: Filled,
        batches: impl Stream<Item = Vec<u8>>,
    ) -> Result<u64, Error> {
        let statement = format!(
            "COPY sitemap_urls (site, loc, section{}) FROM STDIN",
            filled.column_list()
        );
        let mut copy = self.tx.copy_in_raw(&statement).await?;
        let mut batches = std::pin::pin!(batches);
        while let Some(rows) = batches.next().await {
            copy.send(rows).await?;
        }
        Ok(copy.finish().await?)
    }

    /// Applies the staged rows: rows that exist are updated where a field
    /// differs, and new rows are inserted, set-based; folds place them.
    /// With `replace`, that section's rows the file does not have are then
    /// deleted. Locks no row but those it writes.
    pub(crate) async fn apply(
        &mut self,
        replace: Option<(&str, &str)>,
    ) -> Result<ImportCounts, Error> {
        self.run(&[
            "ANALYZE import_rows",
            // Another writer may add one of these locs and commit while the
            // statement runs. The plain INSERT (much cheaper than ON
            // CONFLICT's speculative insertion) is tried first, and on that
            // race the statement runs again with the conflict clause.
            "SAVEPOINT import_write",
        ])
        .await?;
        let plain = sqlx::query_as::<_, (i64, i64)>(WRITE_ROWS)
            .fetch_one(&mut *self.tx)
            .await;
        let (updated, inserted) = match plain {
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                self.run(&["ROLLBACK TO SAVEPOINT import_write"]).await?;
                sqlx::query_as::<_, (i64, i64)>(WRITE_ROWS_RACED)
                    .fetch_one(&mut *self.tx)
                    .await?
            }
            other => other?,
        };
        let deleted = match replace {
            None => 0,
            Some((site, section)) => sqlx::query(
                "DELETE FROM sitemap_urls u
                 WHERE u.site = $1 AND u.section = $2
                   AND NOT EXISTS (SELECT 1 FROM import_rows r WHERE r.site = u.site AND r.loc = u.loc)",
            )
            .bind(site)
            .bind(section)
            .execute(&mut *self.tx)
            .await?
            .rows_affected(),
        };
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let (inserted, updated) = (count(inserted), count(updated));
        Ok(ImportCounts {
            inserted,
            updated,
            unchanged: self.staged.saturating_sub(inserted + updated),
            deleted,
        })
    }

    pub(crate) async fn commit(self) -> Result<(), Error> {
        Ok(self.tx.commit().await?)
    }

    pub(crate) async fn rollback(self) -> Result<(), Error> {
        Ok(self.tx.rollback().await?)
    }
}

/// Writes the import in one statement, so that what is new and what is
/// changed are judged against one snapshot: a row another writer commits
/// meanwhile is either seen as present (and updated) or met by the INSERT
/// (a unique violation, or the conflict clause). Rows stay in key order
/// (the probe is a subquery per row, which keeps the scan's order). Counts
/// (updated, inserted).
macro_rules! write_rows {
    ($on_conflict:literal) => {
        concat!(
            "WITH classified AS MATERIALIZED (
                 SELECT r.site, r.section, r.loc, r.lastmod, r.changefreq, r.priority,
                        r.images, r.videos, r.news, r.hreflang, r.hreflang_cluster,
                        r.visible_from, r.visible_until,
                        -- NULL: no such row; else whether a field differs
                        (SELECT (e.section, e.lastmod, e.changefreq, e.priority,
                                 e.images, e.videos, e.news, e.hreflang, e.hreflang_cluster,
                                 e.visible_from, e.visible_until)
                                IS DISTINCT FROM (r.section, r.lastmod, r.changefreq, r.priority,
                                 r.images, r.videos, r.news, r.hreflang, r.hreflang_cluster,
                                 r.visible_from, r.visible_until)
                         FROM sitemap_urls e WHERE e.site = r.site AND e.loc = r.loc) AS differs
                 FROM import_rows r
             ), changed AS (
                 UPDATE sitemap_urls u
                 SET section = c.section, lastmod = c.lastmod, changefreq = c.changefreq, priority = c.priority,
                     images = c.images, videos = c.videos, news = c.news, hreflang = c.hreflang,
                     hreflang_cluster = c.hreflang_cluster, visible_from = c.visible_from,
                     visible_until = c.visible_until
                 FROM classified c
                 WHERE c.differs AND u.site = c.site AND u.loc = c.loc
                   AND (u.section, u.lastmod, u.changefreq, u.priority,
                        u.images, u.videos, u.news, u.hreflang, u.hreflang_cluster,
                        u.visible_from, u.visible_until)
                       IS DISTINCT FROM (c.section, c.lastmod, c.changefreq, c.priority,
                        c.images, c.videos, c.news, c.hreflang, c.hreflang_cluster,
                        c.visible_from, c.visible_until)
                 RETURNING 1
             ), added AS (
                 INSERT INTO sitemap_urls AS u (site, section, loc, lastmod, changefreq, priority,
                                                images, videos, news, hreflang, hreflang_cluster,
                                                visible_from, visible_until)
                 SELECT c.site, c.section, c.loc, c.lastmod, c.changefreq, c.priority,
                        c.images, c.videos, c.news, c.hreflang, c.hreflang_cluster,
                        c.visible_from, c.visible_until
                 FROM classified c
                 WHERE c.differs IS NULL ",
            $on_conflict,
            " RETURNING (xmax = 0) AS fresh
             )
             -- `changed` first: its scan fills `classified` before any row is
             -- added, so the probes meet the index as the snapshot has it
             SELECT (SELECT count(*) FROM changed) + (SELECT count(*) FROM added WHERE NOT fresh),
                    (SELECT count(*) FROM added WHERE fresh)"
        )
    };
}

const WRITE_ROWS: &str = write_rows!("");

/// The same, for when one of the new locs turned out to exist after all.
const WRITE_ROWS_RACED: &str = write_rows!(
    "ON CONFLICT (site, loc) DO UPDATE
     SET section = excluded.section, lastmod = excluded.lastmod,
         changefreq = excluded.changefreq, priority = excluded.priority,
         images = excluded.images, videos = excluded.videos, news = excluded.news,
         hreflang = excluded.hreflang, hreflang_cluster = excluded.hreflang_cluster,
         visible_from = excluded.visible_from, visible_until = excluded.visible_until
     WHERE (u.section, u.lastmod, u.changefreq, u.priority,
            u.images, u.videos, u.news, u.hreflang, u.hreflang_cluster,
            u.visible_from, u.visible_until)
           IS DISTINCT FROM (excluded.section, excluded.lastmod, excluded.changefreq, excluded.priority,
            excluded.images, excluded.videos, excluded.news, excluded.hreflang, excluded.hreflang_cluster,
            excluded.visible_from, excluded.visible_until)"
);
