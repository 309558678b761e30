//! The crawler ledger's tables (migration `crawler_ledger`): batches of
//! fetches added in, and the ledger and hourly counts read back.

use time::OffsetDateTime;

use super::{Error, Store};

/// The fetches of one file by one crawler since the last batch.
#[derive(Debug, Clone)]
pub(crate) struct FileFetches {
    pub(crate) site: String,
    pub(crate) file: String,
    pub(crate) crawler: &'static str,
    pub(crate) verified: bool,
    pub(crate) first: OffsetDateTime,
    pub(crate) last: OffsetDateTime,
    pub(crate) last_status: u16,
    pub(crate) served_version: Option<OffsetDateTime>,
    pub(crate) fetches: u64,
    pub(crate) bytes: u64,
}

/// Fetches of a site's files by one crawler in one hour.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HourKey {
    pub(crate) site: String,
    pub(crate) crawler: &'static str,
    pub(crate) hour: OffsetDateTime,
}

/// A row of the ledger, as kept.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct LedgerRow {
    pub(crate) site: String,
    pub(crate) file: String,
    pub(crate) crawler: String,
    pub(crate) verified: bool,
    pub(crate) first_fetch: OffsetDateTime,
    pub(crate) last_fetch: OffsetDateTime,
    pub(crate) last_status: i32,
    pub(crate) served_version: Option<OffsetDateTime>,
    pub(crate) fetches: i64,
    pub(crate) bytes: i64,
}

/// A count per hour, oldest first.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct HourCount {
    pub(crate) series: String,
    pub(crate) hour: OffsetDateTime,
    pub(crate) count: i64,
}

impl Store {
    /// Adds a batch to the ledger and the hourly counts, in one
    /// transaction: what another replica adds at once is added too.
    pub(crate) async fn record_crawler_fetches(
        &self,
        files: &[FileFetches],
        hours: &[(HourKey, u64)],
    ) -> Result<(), Error> {
        let mut tx = self.pool().begin().await?;
        let column = |f: fn(&FileFetches) -> i64| files.iter().map(f).collect::<Vec<_>>();
        sqlx::query(
            "SELECT sitemap_record_crawler_fetches($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(files.iter().map(|f| f.site.as_str()).collect::<Vec<_>>())
        .bind(files.iter().map(|f| f.file.as_str()).collect::<Vec<_>>())
        .bind(files.iter().map(|f| f.crawler).collect::<Vec<_>>())
        .bind(files.iter().map(|f| f.verified).collect::<Vec<_>>())
        .bind(files.iter().map(|f| f.first).collect::<Vec<_>>())
        .bind(files.iter().map(|f| f.last).collect::<Vec<_>>())
        .bind(
            files
                .iter()
                .map(|f| i32::from(f.last_status))
                .collect::<Vec<_>>(),
        )
        .bind(files.iter().map(|f| f.served_version).collect::<Vec<_>>())
        .bind(column(|f| i64::try_from(f.fetches).unwrap_or(i64::MAX)))
        .bind(column(|f| i64::try_from(f.bytes).unwrap_or(i64::MAX)))
        .execute(&mut *tx)
        .await?;
        sqlx::query("SELECT sitemap_record_crawler_hours($1, $2, $3, $4)")
            .bind(
                hours
                    .iter()
                    .map(|(k, _)| k.site.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(hours.iter().map(|(k, _)| k.crawler).collect::<Vec<_>>())
            .bind(hours.iter().map(|(k, _)| k.hour).collect::<Vec<_>>())
            .bind(
                hours
                    .iter()
                    .map(|(_, n)| i64::try_from(*n).unwrap_or(i64::MAX))
                    .collect::<Vec<_>>(),
            )
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Drops hourly counts older than 30 days.
    pub(crate) async fn prune_crawler_hours(&self) -> Result<u64, Error> {
        Ok(
            sqlx::query(
                "DELETE FROM sitemap_crawler_hours WHERE hour < now() - interval '30 days'",
            )
            .execute(self.pool())
            .await?
            .rows_affected(),
        )
    }

    /// The ledger, of one site or all, by site, file and crawler.
    pub(crate) async fn crawler_ledger(&self, site: Option<&str>) -> Result<Vec<LedgerRow>, Error> {
        Ok(sqlx::query_as(
            "SELECT site, file, crawler, verified, first_fetch, last_fetch, last_status,
                    served_version, fetches, bytes
             FROM sitemap_crawler_ledger
             WHERE $1::text IS NULL OR site = $1
             ORDER BY site, file, crawler",
        )
        .bind(site)
        .fetch_all(self.pool())
        .await?)
    }

    /// A site's fetches per hour by crawler since `since`, and its URL
    /// changes per hour from the change feed (series `changes`).
    pub(crate) async fn crawler_hours(
        &self,
        site: &str,
        since: OffsetDateTime,
    ) -> Result<Vec<HourCount>, Error> {
        Ok(sqlx::query_as(
            "SELECT crawler AS series, hour, fetches AS count
             FROM sitemap_crawler_hours WHERE site = $1 AND hour >= $2
             UNION ALL
             SELECT 'changes', date_trunc('hour', committed_at), count(*)
             FROM sitemap_changes WHERE site = $1 AND committed_at >= $2
             GROUP BY 2
             ORDER BY 2, 1",
        )
        .bind(site)
        .bind(since)
        .fetch_all(self.pool())
        .await?)
    }

    /// How many rows of a page changed after `since` (a crawler's last
    /// read): rows placed on it whose `updated_at` is later.
    pub(crate) async fn page_changes_since(
        &self,
        site: &str,
        section: &str,
        page: i32,
        since: OffsetDateTime,
    ) -> Result<i64, Error> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM sitemap_urls u
             WHERE u.id IN (SELECT unnest(r.ids) FROM sitemap_placement_runs r
                            WHERE r.site = $1 AND r.section = $2 AND r.page = $3
                            UNION ALL
                            SELECT p.id FROM sitemap_placements p
                            WHERE p.site = $1 AND p.section = $2 AND p.page = $3)
               AND u.updated_at > $4",
        )
        .bind(site)
        .bind(section)
        .bind(page)
        .bind(since)
        .fetch_one(self.pool())
        .await?)
    }
}
