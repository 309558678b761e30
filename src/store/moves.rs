//! A site's move between cells (`sitemapd sites move`): the statements of
//! each side, the source (`sitemap_site_moves.direction = 'out'`) and the
//! target (`'in'`), and the copy that streams rows from one to the other.
//!
//! The move's own statements set `sitemapd.move = on`, which the refusing
//! trigger lets through: it copies into a site whose writes the target
//! refuses, and deletes from one whose writes the source refuses.

use futures_util::StreamExt;
use sqlx::{PgConnection, Postgres, Transaction};
use time::OffsetDateTime;

use super::{Error, Store};

/// The columns a move copies, in `COPY`'s binary form: the same types on
/// both sides, so the bytes go through as they are. Ids are the target's.
macro_rules! moved_columns {
    () => {
        "site, section, loc, lastmod, changefreq, priority, updated_at, images, videos, news, \
         hreflang, hreflang_cluster, visible_from, visible_until"
    };
}

/// Rows a clean-up deletes per transaction.
const DELETE_BATCH_ROWS: i64 = 10_000;

/// Which way a site moves, as this database sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Out,
    In,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Direction::Out => "out",
            Direction::In => "in",
        }
    }
}

/// A site's row of `sitemap_site_moves`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct MoveRow {
    pub(crate) direction: String,
    pub(crate) other_cell: String,
    pub(crate) verified_at: Option<OffsetDateTime>,
}

impl MoveRow {
    pub(crate) fn is(&self, direction: Direction) -> bool {
        self.direction == direction.as_str()
    }
}

/// A transaction the switch waits for: it may have written the site
/// without seeing that its writes are refused.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct OpenTransaction {
    pub(crate) pid: Option<i32>,
    pub(crate) xid: String,
    pub(crate) started: Option<OffsetDateTime>,
    pub(crate) query: Option<String>,
}

/// What one round of the copy did.
#[derive(Debug, Clone)]
pub(crate) struct CopyRound {
    /// Rows copied (all of the site's on the first round, then those
    /// changed since the last).
    pub(crate) copied: u64,
    /// Rows the target deleted: gone from the source since the last round.
    pub(crate) deleted: u64,
    /// The site's rows, the same on both sides once the round commits.
    pub(crate) rows: i64,
    /// The source's snapshot the round read: the next reads what it did
    /// not see.
    pub(crate) snapshot: String,
}

/// What a cell holds and serves of a site: its rows and a checksum of them
/// (the sum of a 64-bit hash of each row's section, loc and every field its
/// entry is written from, whatever order they are read or placed in), the
/// entries its pages serve, and the rows left out of them.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ServedDigest {
    pub rows: i64,
    pub checksum: String,
    pub entries: i64,
    pub skipped: i64,
}

impl Store {
    /// The site's move as this database has it.
    pub(crate) async fn site_move(&self, site: &str) -> Result<Option<MoveRow>, Error> {
        Ok(sqlx::query_as(
            "SELECT direction, other_cell, verified_at
             FROM sitemap_site_moves WHERE site = $1",
        )
        .bind(site)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The sites the proxy must not send here: arriving, or moved away.
    pub(crate) async fn sites_routed_elsewhere(&self) -> Result<Vec<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT site FROM sitemap_site_moves WHERE direction = 'in' OR verified_at IS NOT NULL",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records the site's move, unless a row says so already.
    pub(crate) async fn start_site_move(
        &self,
        site: &str,
        direction: Direction,
        other_cell: &str,
    ) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO sitemap_site_moves (site, direction, other_cell, refuses_writes)
             VALUES ($1, $2, $3, $2 = 'in') ON CONFLICT (site) DO NOTHING",
        )
        .bind(site)
        .bind(direction.as_str())
        .bind(other_cell)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Refuses the site's writes from the next statement on; returns when
    /// that took effect, for [`Store::transactions_open_since_before`].
    pub(crate) async fn refuse_site_writes(&self, site: &str) -> Result<OffsetDateTime, Error> {
        sqlx::query("UPDATE sitemap_site_moves SET refuses_writes = true WHERE site = $1")
            .bind(site)
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query_scalar("SELECT clock_timestamp()")
            .fetch_one(&self.pool)
            .await?)
    }

    /// Takes the site's writes again: a switch that did not happen.
    pub(crate) async fn take_site_writes(&self, site: &str) -> Result<(), Error> {
        sqlx::query("UPDATE sitemap_site_moves SET refuses_writes = false WHERE site = $1")
            .bind(site)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Transactions of this database begun before `since` and still open
    /// that hold an xid or a snapshot: each may write a row it checked
    /// before its site's writes were refused.
    pub(crate) async fn transactions_open_since_before(
        &self,
        since: OffsetDateTime,
    ) -> Result<Vec<OpenTransaction>, Error> {
        Ok(sqlx::query_as(
            "SELECT pid, coalesce(backend_xid, backend_xmin)::text AS xid,
                    xact_start AS started, left(query, 200) AS query
             FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_type = 'client backend' AND xact_start < $1
               AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
             ORDER BY xact_start",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The move's check passed on both sides.
    pub(crate) async fn mark_site_move_verified(&self, site: &str) -> Result<(), Error> {
        sqlx::query("UPDATE sitemap_site_moves SET verified_at = now() WHERE site = $1")
            .bind(site)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Forgets the site's move: its writes are taken again.
    pub(crate) async fn end_site_move(&self, site: &str) -> Result<(), Error> {
        sqlx::query("DELETE FROM sitemap_site_moves WHERE site = $1")
            .bind(site)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deletes every row of the site, in short transactions; returns how
    /// many went.
    pub(crate) async fn delete_moved_rows(&self, site: &str) -> Result<u64, Error> {
        let mut deleted = 0;
        loop {
            let mut tx = self.move_transaction().await?;
            let batch = sqlx::query(
                "DELETE FROM sitemap_urls WHERE id IN
                     (SELECT id FROM sitemap_urls WHERE site = $1 LIMIT $2)",
            )
            .bind(site)
            .bind(DELETE_BATCH_ROWS)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            deleted += batch;
            if batch == 0 {
                return Ok(deleted);
            }
        }
    }

    /// The site's rows, counted and summed, and its entries served and
    /// left out, in one snapshot.
    pub(crate) async fn served_digest(&self, site: &str) -> Result<ServedDigest, Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        // Rendered in UTC, so both servers print the same text whatever
        // their time zones.
        sqlx::query("SET LOCAL TimeZone = 'UTC'")
            .execute(&mut *tx)
            .await?;
        let digest = sqlx::query_as(
            "SELECT r.rows, r.checksum,
                    (SELECT coalesce(sum(url_count), 0)::bigint FROM sitemap_pages
                     WHERE site = $1) AS entries,
                    (SELECT count(*) FROM sitemap_placements
                     WHERE site = $1 AND skip_reason IS NOT NULL) AS skipped
             FROM (SELECT count(*) AS rows,
                          coalesce(sum(hashtextextended(ROW(section, loc, lastmod, changefreq,
                              priority, updated_at, images, videos, news, hreflang,
                              hreflang_cluster, visible_from, visible_until)::text, 0)::numeric),
                                   0)::text AS checksum
                   FROM sitemap_urls WHERE site = $1) r",
        )
        .bind(site)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(digest)
    }

    /// Opens the arrived site to writes, with its IndexNow key: its cursor
    /// starts at the feed's end, so the copy's entries are not sent again
    /// (the source sent each URL when it changed there).
    pub(crate) async fn open_arrived_site(
        &self,
        site: &str,
        indexnow_key: Option<&str>,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        if indexnow_key.is_some() {
            sqlx::query(
                "INSERT INTO sitemap_indexnow_cursors (site, delivered_through)
                 VALUES ($1, (SELECT coalesce(max(seq), 0) FROM sitemap_changes))
                 ON CONFLICT (site) DO UPDATE SET delivered_through = excluded.delivered_through",
            )
            .bind(site)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE sitemap_sites SET indexnow_key = $2 WHERE site = $1")
            .bind(site)
            .bind(indexnow_key)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sitemap_site_moves WHERE site = $1")
            .bind(site)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Stops telling search engines of the site's changes: its removal
    /// from the source is not news to them.
    pub(crate) async fn stop_pushing_site(&self, site: &str) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE sitemap_sites SET indexnow_key = NULL WHERE site = $1")
            .bind(site)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sitemap_indexnow_cursors WHERE site = $1")
            .bind(site)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sitemap_submissions WHERE site = $1")
            .bind(site)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A transaction whose writes pass the refusing trigger.
    async fn move_transaction(&self) -> Result<Transaction<'static, Postgres>, Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT set_config('sitemapd.move', 'on', true)")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }
}

/// Copies the site's rows from `source` to `target` in one transaction on
/// each: all of them when `after` is `None`, else those changed since the
/// snapshot `after`, and deletes from the target the rows gone from the
/// source since. Both hold the same rows (by loc) when it returns.
pub(crate) async fn copy_site_rows(
    source: &Store,
    target: &Store,
    site: &str,
    after: Option<&str>,
) -> Result<CopyRound, Error> {
    let mut read = source.pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *read)
        .await?;
    // COPY takes no parameters: its query reads them from settings.
    let (_, _, snapshot): (String, String, String) = sqlx::query_as(
        "SELECT set_config('sitemapd.move_site', $1, true),
                set_config('sitemapd.move_after', $2, true),
                pg_current_snapshot()::text",
    )
    .bind(site)
    .bind(after.unwrap_or(""))
    .fetch_one(&mut *read)
    .await?;
    let mut write = target.move_transaction().await?;
    let copied = match after {
        None => {
            pipe(
                &mut read,
                concat!(
                    "COPY (SELECT ",
                    moved_columns!(),
                    " FROM sitemap_urls WHERE site = current_setting('sitemapd.move_site')
                     ORDER BY id) TO STDOUT (FORMAT binary)"
                ),
                &mut write,
                concat!(
                    "COPY sitemap_urls (",
                    moved_columns!(),
                    ") FROM STDIN (FORMAT binary)"
                ),
            )
            .await?
        }
        Some(_) => {
            sqlx::query(
                "CREATE TEMP TABLE sitemap_move_rows ON COMMIT DROP AS
                 SELECT site, section, loc, lastmod, changefreq, priority, updated_at, images,
                        videos, news, hreflang, hreflang_cluster, visible_from, visible_until
                 FROM sitemap_urls WITH NO DATA",
            )
            .execute(&mut *write)
            .await?;
            let copied = pipe(
                &mut read,
                concat!(
                    "COPY (SELECT ",
                    moved_columns!(),
                    " FROM sitemap_urls WHERE site = current_setting('sitemapd.move_site')
                       AND change_xid >= pg_snapshot_xmin(current_setting('sitemapd.move_after')::pg_snapshot)
                       AND NOT pg_visible_in_snapshot(change_xid, current_setting('sitemapd.move_after')::pg_snapshot)
                     ORDER BY id) TO STDOUT (FORMAT binary)"
                ),
                &mut write,
                concat!(
                    "COPY sitemap_move_rows (",
                    moved_columns!(),
                    ") FROM STDIN (FORMAT binary)"
                ),
            )
            .await?;
            sqlx::query(
                "INSERT INTO sitemap_urls AS u (site, section, loc, lastmod, changefreq, priority,
                     updated_at, images, videos, news, hreflang, hreflang_cluster, visible_from,
                     visible_until)
                 SELECT site, section, loc, lastmod, changefreq, priority, updated_at, images,
                        videos, news, hreflang, hreflang_cluster, visible_from, visible_until
                 FROM sitemap_move_rows
                 ON CONFLICT (site, loc) DO UPDATE SET
                     section = excluded.section, lastmod = excluded.lastmod,
                     changefreq = excluded.changefreq, priority = excluded.priority,
                     updated_at = excluded.updated_at, images = excluded.images,
                     videos = excluded.videos, news = excluded.news,
                     hreflang = excluded.hreflang, hreflang_cluster = excluded.hreflang_cluster,
                     visible_from = excluded.visible_from, visible_until = excluded.visible_until
                 WHERE (u.section, u.lastmod, u.changefreq, u.priority, u.updated_at, u.images,
                        u.videos, u.news, u.hreflang, u.hreflang_cluster, u.visible_from,
                        u.visible_until)
                     IS DISTINCT FROM
                       (excluded.section, excluded.lastmod, excluded.changefreq,
                        excluded.priority, excluded.updated_at, excluded.images,
                        excluded.videos, excluded.news, excluded.hreflang,
                        excluded.hreflang_cluster, excluded.visible_from, excluded.visible_until)",
            )
            .execute(&mut *write)
            .await?;
            copied
        }
    };
    let rows = site_rows(&mut read, site).await?;
    let mut deleted = 0;
    // The target holds every row the source does (those unchanged since the
    // last round were copied then, the others now): more rows than the
    // source means some left it since.
    if site_rows(&mut write, site).await? != rows {
        sqlx::query("CREATE TEMP TABLE sitemap_move_locs (loc text NOT NULL) ON COMMIT DROP")
            .execute(&mut *write)
            .await?;
        pipe(
            &mut read,
            "COPY (SELECT loc FROM sitemap_urls WHERE site = current_setting('sitemapd.move_site'))
             TO STDOUT (FORMAT binary)",
            &mut write,
            "COPY sitemap_move_locs (loc) FROM STDIN (FORMAT binary)",
        )
        .await?;
        deleted = sqlx::query(
            "DELETE FROM sitemap_urls u WHERE u.site = $1
             AND NOT EXISTS (SELECT 1 FROM sitemap_move_locs l WHERE l.loc = u.loc)",
        )
        .bind(site)
        .execute(&mut *write)
        .await?
        .rows_affected();
        let left = site_rows(&mut write, site).await?;
        if left != rows {
            return Err(Error::Move(format!(
                "site {site}: the target holds {left} rows after the copy, the source {rows}"
            )));
        }
    }
    write.commit().await?;
    read.commit().await?;
    Ok(CopyRound {
        copied,
        deleted,
        rows,
        snapshot,
    })
}

async fn site_rows(conn: &mut PgConnection, site: &str) -> Result<i64, Error> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM sitemap_urls WHERE site = $1")
            .bind(site)
            .fetch_one(conn)
            .await?,
    )
}

/// Streams one `COPY … TO STDOUT` into one `COPY … FROM STDIN`; returns
/// the rows copied.
async fn pipe(
    from: &mut PgConnection,
    out: &str,
    to: &mut PgConnection,
    into: &str,
) -> Result<u64, Error> {
    let mut copy = to.copy_in_raw(into).await?;
    let mut stream = from.copy_out_raw(out).await?;
    while let Some(chunk) = stream.next().await {
        copy.send(chunk?).await?;
    }
    Ok(copy.finish().await?)
}
