//! The URL audit's table, `sitemap_audits` (migration `url_audit`): which
//! rows are due a check, and the checks made.

use std::collections::HashSet;

use sqlx::PgConnection;
use time::OffsetDateTime;

use super::{Error, Store, Turn, turn};

/// A row to check.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct DueRow {
    pub(crate) id: i64,
    pub(crate) loc: String,
    pub(crate) updated_at: OffsetDateTime,
    /// Found by the pass over rows never checked or changed since (else
    /// due again by age).
    pub(crate) in_pass: bool,
}

/// An audited URL, as the operators' view lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AuditedUrl {
    pub(crate) loc: String,
    pub(crate) status: Option<i32>,
    pub(crate) checked_at: OffsetDateTime,
    /// Its Location, canonical, noindex and why a check failed, as text.
    pub(crate) said: String,
}

/// One check, as kept.
#[derive(Debug, Clone)]
pub(crate) struct AuditRecord {
    pub(crate) id: i64,
    pub(crate) loc: String,
    pub(crate) row_updated_at: OffsetDateTime,
    pub(crate) status: Option<i32>,
    pub(crate) location: Option<String>,
    pub(crate) noindex: bool,
    pub(crate) canonical: Option<String>,
    pub(crate) finding: &'static str,
    pub(crate) detail: Option<String>,
}

impl Store {
    /// Up to `limit` of the site's rows past id `after` never checked or
    /// changed since, in id order, then up to `limit` whose check is older
    /// than `interval`.
    pub(crate) async fn audit_due(
        &self,
        site: &str,
        interval: std::time::Duration,
        limit: i32,
        after: i64,
    ) -> Result<Vec<DueRow>, Error> {
        Ok(sqlx::query_as(
            "SELECT id, loc, updated_at, in_pass
             FROM sitemap_audit_due($1, make_interval(secs => $2), $3, $4)",
        )
        .bind(site)
        .bind(interval.as_secs_f64())
        .bind(limit)
        .bind(after)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Keeps the checks made, one row per URL. Where the site leaves
    /// findings out (`leaves_out`), it takes the folds' turn, and the rows
    /// whose verdict the checks turned go back to be placed again in the
    /// same transaction.
    pub(crate) async fn record_audits(
        &self,
        site: &str,
        checks: &[AuditRecord],
        leaves_out: bool,
    ) -> Result<(), Error> {
        if checks.is_empty() {
            return Ok(());
        }
        if !leaves_out {
            let mut conn = self.pool.acquire().await?;
            return upsert(&mut conn, site, checks).await;
        }
        let Some(mut held) = turn::HeldTurn::take(&self.pool, Turn::Wait).await? else {
            return Ok(());
        };
        let mut tx = held.begin(false).await?;
        let ids: Vec<i64> = checks.iter().map(|c| c.id).collect();
        let left_out = |ids: &[i64]| {
            sqlx::query_scalar::<_, i64>(
                "SELECT a.id FROM sitemap_audits a JOIN sitemap_urls u ON u.id = a.id
                 WHERE a.id = ANY ($1) AND sitemap_audit_leaves_out(u.site, u.id, u.loc) IS NOT NULL",
            )
            .bind(ids.to_vec())
        };
        let before: HashSet<i64> = left_out(&ids)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
        upsert(&mut tx, site, checks).await?;
        let after: HashSet<i64> = left_out(&ids)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
        let turned: Vec<i64> = before.symmetric_difference(&after).copied().collect();
        if !turned.is_empty() {
            sqlx::query("SELECT sitemap_unplace($1)")
                .bind(&turned)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        held.release().await
    }

    /// How many of the site's URLs the finding holds, and `limit` of them
    /// from the `offset`th, in id order, with what each answered.
    pub(crate) async fn audited_urls(
        &self,
        site: &str,
        finding: &str,
        offset: i64,
        limit: i64,
    ) -> Result<(i64, Vec<AuditedUrl>), Error> {
        let total: i64 = sqlx::query_scalar(
            "SELECT coalesce((SELECT urls FROM sitemap_audit_finding_counts
                              WHERE site = $1 AND finding = $2), 0)",
        )
        .bind(site)
        .bind(finding)
        .fetch_one(&self.pool)
        .await?;
        let urls = sqlx::query_as(
            "SELECT loc, status, checked_at,
                    concat_ws(' ', '→ ' || location, 'canonical ' || canonical,
                              CASE WHEN noindex THEN 'noindex' END, detail) AS said
             FROM sitemap_audits WHERE site = $1 AND finding = $2
             ORDER BY id OFFSET $3 LIMIT $4",
        )
        .bind(site)
        .bind(finding)
        .bind(offset)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok((total, urls))
    }

    /// Forgets the checks of the site's rows that are gone.
    pub(crate) async fn forget_gone_audits(&self, site: &str) -> Result<u64, Error> {
        Ok(sqlx::query(
            "DELETE FROM sitemap_audits a
             WHERE a.site = $1 AND NOT EXISTS (SELECT 1 FROM sitemap_urls u WHERE u.id = a.id)",
        )
        .bind(site)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Takes the auditor's turn: a session lock on a connection of its own,
    /// held while it lives (it closes when dropped), so one replica audits
    /// at a time and each site's rate holds across them.
    pub(crate) async fn take_audit_turn(&self) -> Result<Option<sqlx::PgConnection>, Error> {
        let mut conn = self.pool.acquire().await?;
        let taken: bool =
            sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtext('sitemapd audit'))")
                .fetch_one(&mut *conn)
                .await?;
        Ok(taken.then(|| conn.detach()))
    }
}

/// Writes `checks`, one row per URL, in one statement.
async fn upsert(conn: &mut PgConnection, site: &str, checks: &[AuditRecord]) -> Result<(), Error> {
    let column = |f: fn(&AuditRecord) -> Option<String>| checks.iter().map(f).collect::<Vec<_>>();
    sqlx::query(
        "INSERT INTO sitemap_audits AS a (id, site, loc, row_updated_at, checked_at, status,
                                         location, noindex, canonical, finding, detail)
         SELECT c.id, $1, c.loc, c.row_updated_at, now(), c.status, c.location, c.noindex,
                c.canonical, c.finding, c.detail
         FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::integer[], $6::text[],
                     $7::boolean[], $8::text[], $9::text[], $10::text[])
              AS c(id, loc, row_updated_at, status, location, noindex, canonical, finding, detail)
         ON CONFLICT (id) DO UPDATE SET
             site = excluded.site, loc = excluded.loc, row_updated_at = excluded.row_updated_at,
             checked_at = excluded.checked_at, status = excluded.status,
             location = excluded.location, noindex = excluded.noindex,
             canonical = excluded.canonical, finding = excluded.finding, detail = excluded.detail",
    )
    .bind(site)
    .bind(checks.iter().map(|c| c.id).collect::<Vec<_>>())
    .bind(column(|c| Some(c.loc.clone())))
    .bind(checks.iter().map(|c| c.row_updated_at).collect::<Vec<_>>())
    .bind(checks.iter().map(|c| c.status).collect::<Vec<_>>())
    .bind(column(|c| c.location.clone()))
    .bind(checks.iter().map(|c| c.noindex).collect::<Vec<_>>())
    .bind(column(|c| c.canonical.clone()))
    .bind(checks.iter().map(|c| c.finding).collect::<Vec<_>>())
    .bind(column(|c| c.detail.clone()))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
