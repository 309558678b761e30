//! Bulk writes in one transaction: records copied into a staging table,
//! then applied set-based, for `sitemapd import` and the write API alike.

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

/// One import's transaction: rows are copied into a staging table, then
/// applied in one statement. Dropping it unapplied rolls everything back.
#[derive(Debug)]
pub struct ImportSession {
    tx: sqlx::Transaction<'static, Postgres>,
}

impl Store {
    /// Starts an import: a transaction holding an empty staging table.
    pub async fn begin_import(&self) -> Result<ImportSession, Error> {
        let mut tx = self.pool.begin().await?;
        // The de-duplicating and numbering sorts run over the whole file:
        // in memory rather than in temporary files, up to a point.
        sqlx::query("SET LOCAL work_mem = '64MB'")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "CREATE TEMP TABLE import_staging (
                 ord bigint NOT NULL,
                 site text NOT NULL,
                 section text NOT NULL,
                 loc text NOT NULL,
                 lastmod timestamptz,
                 changefreq text,
                 priority real
             ) ON COMMIT DROP",
        )
        .execute(&mut *tx)
        .await?;
        Ok(ImportSession { tx })
    }
}

impl ImportSession {
    /// Copies rows, in `COPY` text format, into the staging table.
    pub async fn copy(&mut self, rows: Vec<u8>) -> Result<(), Error> {
        let mut copy = self
            .tx
            .copy_in_raw("COPY import_staging FROM STDIN")
            .await?;
        copy.send(rows).await?;
        copy.finish().await?;
        Ok(())
    }

    /// Applies the staged rows (a file's later duplicate of a loc wins):
    /// rows that exist are updated where a field differs, and new rows are
    /// inserted already packed into pages, set-based, so the row trigger has
    /// nothing to do for them. With `replace`, that section's rows the file
    /// does not have are then deleted.
    ///
    /// New rows fill the last page of their section while it has room for
    /// entries as large as this import's largest, then pages of
    /// `min(max_urls, budget / largest entry)` rows: exact count packing for
    /// ordinary URLs, and never over the byte limit for long ones.
    pub async fn apply(&mut self, replace: Option<(&str, &str)>) -> Result<ImportCounts, Error> {
        sqlx::query(
            "CREATE TEMP TABLE import_rows ON COMMIT DROP AS
             SELECT DISTINCT ON (site, loc) ord, site, section, loc, lastmod, changefreq, priority
             FROM import_staging
             ORDER BY site, loc, ord DESC",
        )
        .execute(&mut *self.tx)
        .await?;
        sqlx::query("ANALYZE import_rows")
            .execute(&mut *self.tx)
            .await?;
        let updated = sqlx::query(
            "UPDATE sitemap_urls u
             SET section = r.section, lastmod = r.lastmod, changefreq = r.changefreq, priority = r.priority
             FROM import_rows r
             WHERE u.site = r.site AND u.loc = r.loc
               AND (u.section, u.lastmod, u.changefreq, u.priority)
                   IS DISTINCT FROM (r.section, r.lastmod, r.changefreq, r.priority)",
        )
        .execute(&mut *self.tx)
        .await?
        .rows_affected();
        // Pack against the sections' last pages as they are: hold them.
        sqlx::query(
            "INSERT INTO sitemap_sections (site, section)
             SELECT DISTINCT site, section FROM import_rows ORDER BY 1, 2
             ON CONFLICT DO NOTHING",
        )
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            "SELECT 1 FROM sitemap_sections s
             WHERE (s.site, s.section) IN (SELECT DISTINCT site, section FROM import_rows)
             ORDER BY s.site, s.section
             FOR UPDATE",
        )
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            "CREATE TEMP TABLE import_new ON COMMIT DROP AS
             SELECT r.*, sitemap_entry_bytes(r.loc) AS bytes,
                    row_number() OVER (PARTITION BY r.site, r.section ORDER BY r.ord) - 1 AS k
             FROM import_rows r
             WHERE NOT EXISTS (SELECT 1 FROM sitemap_urls u WHERE u.site = r.site AND u.loc = r.loc)",
        )
        .execute(&mut *self.tx)
        .await?;
        // Under the section locks no other writer adds to these sections,
        // but one may still add one of these locs elsewhere: the plain
        // INSERT (much cheaper than ON CONFLICT's speculative insertion) is
        // tried first, and on that race the upsert runs instead.
        sqlx::query("SAVEPOINT import_insert")
            .execute(&mut *self.tx)
            .await?;
        let plain = sqlx::query_as::<_, (i64, i64)>(INSERT_NEW_ROWS)
            .fetch_one(&mut *self.tx)
            .await;
        let (inserted, raced) = match plain {
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                sqlx::query("ROLLBACK TO SAVEPOINT import_insert")
                    .execute(&mut *self.tx)
                    .await?;
                sqlx::query_as::<_, (i64, i64)>(UPSERT_NEW_ROWS)
                    .fetch_one(&mut *self.tx)
                    .await?
            }
            other => other?,
        };
        let staged: i64 = sqlx::query_scalar("SELECT count(*) FROM import_rows")
            .fetch_one(&mut *self.tx)
            .await?;
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
        let updated = updated + count(raced);
        Ok(ImportCounts {
            inserted: count(inserted),
            updated,
            unchanged: count(staged).saturating_sub(count(inserted) + updated),
            deleted,
        })
    }

    pub async fn commit(self) -> Result<(), Error> {
        Ok(self.tx.commit().await?)
    }

    pub async fn rollback(self) -> Result<(), Error> {
        Ok(self.tx.rollback().await?)
    }
}

/// Inserts `import_new` already packed: the k-th new row of a section goes
/// to its last page while that has room for entries as large as this
/// import's largest, then to pages of `min(max_urls, budget / largest)`.
/// Counts (inserted, updated by the conflict clause).
macro_rules! insert_new_rows {
    ($on_conflict:literal) => {
        concat!(
            "WITH tails AS MATERIALIZED (
                 SELECT s.site, s.section, coalesce(t.page, 1) AS tail,
                        greatest(0, least(c.max_urls - coalesce(t.url_count, 0),
                                          (c.entry_budget - coalesce(t.bytes, 0)) / s.largest)) AS room,
                        least(c.max_urls, c.entry_budget / s.largest) AS per_page
                 FROM (SELECT site, section, max(bytes) AS largest FROM import_new GROUP BY site, section) s
                 CROSS JOIN sitemap_settings c
                 LEFT JOIN LATERAL (SELECT p.page, p.url_count, p.bytes FROM sitemap_pages p
                                    WHERE p.site = s.site AND p.section = s.section
                                    ORDER BY p.page DESC LIMIT 1) t ON true
             ), written AS (
                 INSERT INTO sitemap_urls AS u (site, section, loc, lastmod, changefreq, priority, page)
                 SELECT r.site, r.section, r.loc, r.lastmod, r.changefreq, r.priority,
                        CASE WHEN r.k < t.room THEN t.tail
                             ELSE t.tail + 1 + ((r.k - t.room) / t.per_page)::integer END
                 FROM import_new r JOIN tails t ON t.site = r.site AND t.section = r.section
                 ORDER BY r.ord ",
            $on_conflict,
            " RETURNING (xmax = 0) AS inserted
             )
             SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM written"
        )
    };
}

const INSERT_NEW_ROWS: &str = insert_new_rows!("");
/// The same, for when one of the locs turned out to exist after all.
const UPSERT_NEW_ROWS: &str = insert_new_rows!(
    "ON CONFLICT (site, loc) DO UPDATE
     SET section = excluded.section, lastmod = excluded.lastmod,
         changefreq = excluded.changefreq, priority = excluded.priority
     WHERE (u.section, u.lastmod, u.changefreq, u.priority)
           IS DISTINCT FROM (excluded.section, excluded.lastmod, excluded.changefreq, excluded.priority)"
);
