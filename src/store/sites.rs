//! The sites and their tokens: `sitemap_sites` and `sitemap_site_tokens`.
//!
//! Their triggers announce every change on channel `sitemapd_sites` and
//! queue a new site, or a moved one, for the next fold to place its rows
//! again; nothing here waits for a fold.

use time::OffsetDateTime;

use super::{Error, Store};
use crate::site::{AuditSettings, IndexFormat, RobotsCheck, Site};

/// The columns a [`Site`] is read from.
macro_rules! site_columns {
    () => {
        "site, origin, path_prefix, robots_txt, include_subfolder_sites, \
         indexnow_key, index_format, nested_index, robots_check, robots_check_agents, \
         audit, audit_origin, audit_requests_per_second, audit_user_agent, \
         extract(epoch FROM audit_interval)::float8 AS audit_interval_seconds, audit_leave_out, \
         created_at, updated_at"
    };
}

/// Rows of `sitemap_urls` a purge deletes per transaction: each takes a
/// fraction of a second, so neither writers nor folds wait on it for long.
const PURGE_BATCH_ROWS: i64 = 10_000;

/// Rounds of a purge that find rows again after the last batch (writers
/// still writing the site) before it gives up.
const PURGE_ROUNDS: usize = 20;

#[derive(Debug, sqlx::FromRow)]
struct SiteRow {
    site: String,
    origin: String,
    path_prefix: String,
    robots_txt: Option<String>,
    include_subfolder_sites: bool,
    indexnow_key: Option<String>,
    index_format: String,
    nested_index: bool,
    robots_check: String,
    robots_check_agents: Vec<String>,
    audit: bool,
    audit_origin: Option<String>,
    audit_requests_per_second: f64,
    audit_user_agent: Option<String>,
    audit_interval_seconds: f64,
    audit_leave_out: Vec<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

/// A site as stored, with when it was created and last changed.
#[derive(Debug, Clone)]
pub struct StoredSite {
    pub site: Site,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl SiteRow {
    /// The site the row describes; `None` (logged) for one whose base URL
    /// the service cannot serve, which only plain SQL can write past the
    /// schema's constraints.
    fn stored(self) -> Option<StoredSite> {
        let base_url = format!("{}{}", self.origin, self.path_prefix);
        let mut site = match Site::new(&self.site, &base_url, self.robots_txt) {
            Ok(site) => site,
            Err(rule) => {
                tracing::warn!(site = %self.site, %base_url, rule, "sitemap_sites: a base URL that cannot be served; the site is left out");
                return None;
            }
        };
        site.include_subfolder_sites = self.include_subfolder_sites;
        site.indexnow_key = self.indexnow_key;
        site.index_format = IndexFormat::parse(&self.index_format).unwrap_or_default();
        site.nested_index = self.nested_index;
        site.robots_check = RobotsCheck::parse(&self.robots_check).unwrap_or_default();
        site.robots_check_agents = self.robots_check_agents;
        site.audit = AuditSettings {
            enabled: self.audit,
            origin: self.audit_origin,
            requests_per_second: self.audit_requests_per_second,
            user_agent: self.audit_user_agent,
            interval: std::time::Duration::try_from_secs_f64(self.audit_interval_seconds)
                .unwrap_or(AuditSettings::default().interval),
            leave_out: self.audit_leave_out,
        };
        Some(StoredSite {
            site,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The sites `rows` describe that can be served.
fn served(rows: Vec<SiteRow>) -> Vec<Site> {
    rows.into_iter()
        .filter_map(SiteRow::stored)
        .map(|s| s.site)
        .collect()
}

/// What writing a site did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Created,
    Changed,
    Unchanged,
}

/// Why a site could not be written or removed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SiteWriteError {
    #[error("{0}")]
    Store(#[from] Error),
    /// Another site claims the host (and path) requests would route by.
    #[error("site {other:?} already claims {claimed}")]
    Clash { other: String, claimed: String },
    #[error("no site {0:?}")]
    NoSuchSite(String),
    /// Removing it would leave its URL rows behind.
    #[error(
        "site {0:?} still has URL rows: delete them first, or remove it with purge, which deletes them"
    )]
    RowsRemain(String),
}

impl From<sqlx::Error> for SiteWriteError {
    fn from(error: sqlx::Error) -> Self {
        SiteWriteError::Store(error.into())
    }
}

impl Store {
    /// Every site on `host`.
    pub(crate) async fn sites_on_host(&self, host: &str) -> Result<Vec<Site>, Error> {
        self.serving_reads.sites.inc();
        let rows: Vec<SiteRow> = self
            .in_time(
                sqlx::query_as(concat!(
                    "SELECT ",
                    site_columns!(),
                    " FROM sitemap_sites WHERE host = $1"
                ))
                .bind(host)
                .fetch_all(&self.pool),
            )
            .await?;
        Ok(served(rows))
    }

    /// The sites whose URLs are audited.
    pub(crate) async fn audited_sites(&self) -> Result<Vec<Site>, Error> {
        let rows: Vec<SiteRow> = sqlx::query_as(concat!(
            "SELECT ",
            site_columns!(),
            " FROM sitemap_sites WHERE audit ORDER BY site"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(served(rows))
    }

    /// The site `name`, if there is one.
    pub(crate) async fn site(&self, name: &str) -> Result<Option<StoredSite>, Error> {
        self.serving_reads.sites.inc();
        let row: Option<SiteRow> = self
            .in_time(
                sqlx::query_as(concat!(
                    "SELECT ",
                    site_columns!(),
                    " FROM sitemap_sites WHERE site = $1"
                ))
                .bind(name)
                .fetch_optional(&self.pool),
            )
            .await?;
        Ok(row.and_then(SiteRow::stored))
    }

    /// The only site, when there is exactly one.
    pub(crate) async fn sole_site(&self) -> Result<Option<Site>, Error> {
        self.serving_reads.sites.inc();
        let mut rows: Vec<SiteRow> = self
            .in_time(
                sqlx::query_as(concat!(
                    "SELECT ",
                    site_columns!(),
                    " FROM sitemap_sites LIMIT 2"
                ))
                .fetch_all(&self.pool),
            )
            .await?;
        Ok(match rows.len() {
            1 => rows.pop().and_then(SiteRow::stored).map(|s| s.site),
            _ => None,
        })
    }

    /// Up to `limit` sites by name, after `after` if given.
    pub(crate) async fn list_sites(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<StoredSite>, Error> {
        let rows: Vec<SiteRow> = sqlx::query_as(concat!(
            "SELECT ",
            site_columns!(),
            " FROM sitemap_sites WHERE $1::text IS NULL OR site > $1 ORDER BY site LIMIT $2"
        ))
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().filter_map(SiteRow::stored).collect())
    }

    /// Every site, by name, read a page at a time.
    pub(crate) async fn all_sites(&self) -> Result<Vec<Site>, Error> {
        let mut sites: Vec<Site> = Vec::new();
        loop {
            let after = sites.last().map(|site| site.name.clone());
            let page = self.list_sites(after.as_deref(), 1000).await?;
            if page.is_empty() {
                return Ok(sites);
            }
            sites.extend(page.into_iter().map(|stored| stored.site));
        }
    }

    /// The sites whose pages (or news files) changed after `after`: an
    /// index scan of the change times, however many sites there are.
    pub(crate) async fn sites_changed_after(
        &self,
        after: OffsetDateTime,
    ) -> Result<Vec<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT site FROM sitemap_pages WHERE lastmod > $1
             UNION SELECT site FROM sitemap_news_files WHERE lastmod > $1",
        )
        .bind(after)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The sites whose pages changed since their index was last submitted
    /// to every one of `templates` (or that never were).
    pub(crate) async fn sites_changed_since_submitted(
        &self,
        templates: &[String],
    ) -> Result<Vec<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT p.site FROM sitemap_pages p
             GROUP BY p.site
             HAVING bool_or(p.url_count > 0)
                AND max(p.lastmod) > (
                    SELECT CASE WHEN count(*) < cardinality($1::text[]) THEN '-infinity'
                                ELSE min(coalesce(s.submitted_version, '-infinity')) END
                    FROM sitemap_submissions s
                    WHERE s.site = p.site AND s.template = ANY ($1))",
        )
        .bind(templates)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Creates or changes `site`. Refuses a host and path another site
    /// claims (with `host_alone`, the host: the proxy strips paths, so
    /// requests tell sites apart by host only).
    pub(crate) async fn put_site(
        &self,
        site: &Site,
        host_alone: bool,
    ) -> Result<Written, SiteWriteError> {
        let mut tx = self.pool.begin().await?;
        // Two writers of one host take turns, so the host-alone rule holds
        // without a constraint the schema cannot state.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('sitemapd site host ' || $1))")
            .bind(&site.host)
            .execute(&mut *tx)
            .await?;
        let other: Option<String> = sqlx::query_scalar(
            "SELECT site FROM sitemap_sites
             WHERE host = $1 AND site <> $3 AND ($4 OR path_prefix = $2)
             ORDER BY path_prefix = $2 DESC, site LIMIT 1",
        )
        .bind(&site.host)
        .bind(&site.path_prefix)
        .bind(&site.name)
        .bind(host_alone)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(other) = other {
            return Err(SiteWriteError::Clash {
                other,
                claimed: if host_alone {
                    format!("host {} (proxy_strips_prefix is on)", site.host)
                } else {
                    format!("host {} and path {}", site.host, site.path_prefix)
                },
            });
        }
        let written: Option<bool> = sqlx::query_scalar(
            "INSERT INTO sitemap_sites AS s (site, origin, path_prefix, robots_txt,
                 include_subfolder_sites, indexnow_key, index_format, nested_index,
                 robots_check, robots_check_agents, audit, audit_origin,
                 audit_requests_per_second, audit_user_agent, audit_interval, audit_leave_out)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                     make_interval(secs => $15), $16)
             ON CONFLICT (site) DO UPDATE SET
                 origin = excluded.origin, path_prefix = excluded.path_prefix,
                 robots_txt = excluded.robots_txt,
                 include_subfolder_sites = excluded.include_subfolder_sites,
                 indexnow_key = excluded.indexnow_key, index_format = excluded.index_format,
                 nested_index = excluded.nested_index, robots_check = excluded.robots_check,
                 robots_check_agents = excluded.robots_check_agents, audit = excluded.audit,
                 audit_origin = excluded.audit_origin,
                 audit_requests_per_second = excluded.audit_requests_per_second,
                 audit_user_agent = excluded.audit_user_agent,
                 audit_interval = excluded.audit_interval, audit_leave_out = excluded.audit_leave_out
             WHERE (s.origin, s.path_prefix, s.robots_txt, s.include_subfolder_sites,
                    s.indexnow_key, s.index_format, s.nested_index, s.robots_check,
                    s.robots_check_agents, s.audit, s.audit_origin, s.audit_requests_per_second,
                    s.audit_user_agent, s.audit_interval, s.audit_leave_out)
                   IS DISTINCT FROM
                   (excluded.origin, excluded.path_prefix, excluded.robots_txt,
                    excluded.include_subfolder_sites, excluded.indexnow_key,
                    excluded.index_format, excluded.nested_index, excluded.robots_check,
                    excluded.robots_check_agents, excluded.audit, excluded.audit_origin,
                    excluded.audit_requests_per_second, excluded.audit_user_agent,
                    excluded.audit_interval, excluded.audit_leave_out)
             RETURNING xmax = 0",
        )
        .bind(&site.name)
        .bind(&site.origin)
        .bind(&site.path_prefix)
        .bind(&site.robots_txt)
        .bind(site.include_subfolder_sites)
        .bind(&site.indexnow_key)
        .bind(site.index_format.as_str())
        .bind(site.nested_index)
        .bind(site.robots_check.as_str())
        .bind(&site.robots_check_agents)
        .bind(site.audit.enabled)
        .bind(&site.audit.origin)
        .bind(site.audit.requests_per_second)
        .bind(&site.audit.user_agent)
        .bind(site.audit.interval.as_secs_f64())
        .bind(&site.audit.leave_out)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(match written {
            Some(true) => Written::Created,
            Some(false) => Written::Changed,
            None => Written::Unchanged,
        })
    }

    /// Removes the site `name`, which must have no URL rows left.
    pub(crate) async fn remove_site(&self, name: &str) -> Result<(), SiteWriteError> {
        let mut tx = self.pool.begin().await?;
        let found: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM sitemap_sites WHERE site = $1 FOR UPDATE")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        if found.is_none() {
            return Err(SiteWriteError::NoSuchSite(name.to_owned()));
        }
        let has_rows: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sitemap_urls WHERE site = $1)")
                .bind(name)
                .fetch_one(&mut *tx)
                .await?;
        if has_rows {
            return Err(SiteWriteError::RowsRemain(name.to_owned()));
        }
        sqlx::query("DELETE FROM sitemap_sites WHERE site = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Deletes every URL row of `name` in short transactions, then the site;
    /// returns how many rows went. Writers of the site's rows and folds go
    /// on meanwhile; rows they keep adding are deleted in the rounds after.
    pub(crate) async fn purge_site(&self, name: &str) -> Result<u64, SiteWriteError> {
        if self.site(name).await?.is_none() {
            return Err(SiteWriteError::NoSuchSite(name.to_owned()));
        }
        let mut deleted = 0;
        for _ in 0..PURGE_ROUNDS {
            loop {
                let batch = sqlx::query(
                    "DELETE FROM sitemap_urls WHERE id IN
                         (SELECT id FROM sitemap_urls WHERE site = $1 LIMIT $2)",
                )
                .bind(name)
                .bind(PURGE_BATCH_ROWS)
                .execute(&self.pool)
                .await?
                .rows_affected();
                deleted += batch;
                if batch == 0 {
                    break;
                }
            }
            match self.remove_site(name).await {
                Err(SiteWriteError::RowsRemain(_)) => continue,
                removed => return removed.map(|()| deleted),
            }
        }
        Err(SiteWriteError::RowsRemain(name.to_owned()))
    }

    /// Writes the configuration file's sites, which win over what the table
    /// holds: a differing row is overwritten and a site claiming one of
    /// their hosts and paths is removed (its URL rows stay, left out of the
    /// sitemaps until a site claims them), each logged.
    pub(crate) async fn write_configured_sites(
        &self,
        sites: &[Site],
        host_alone: bool,
    ) -> Result<(), SiteWriteError> {
        for site in sites {
            if let Some(stored) = self.site(&site.name).await? {
                let changed = differences(&stored.site, site);
                if !changed.is_empty() {
                    tracing::warn!(site = %site.name, fields = %changed.join(", "), "the configuration file names this site: its settings replace the table's");
                }
            }
            let evicted: Vec<String> = sqlx::query_scalar(
                "DELETE FROM sitemap_sites
                 WHERE host = $1 AND site <> $3 AND path_prefix = $2 RETURNING site",
            )
            .bind(&site.host)
            .bind(&site.path_prefix)
            .bind(&site.name)
            .fetch_all(&self.pool)
            .await?;
            for other in evicted {
                tracing::warn!(site = %other, base_url = %site.base_url, claimed_by = %site.name, "the configuration file gives this site's base URL to another: removed it (its URL rows stay, left out until a site claims them)");
            }
            self.put_site(site, host_alone).await?;
        }
        Ok(())
    }

    /// The site a token's digest belongs to, if any.
    pub(crate) async fn token_site(&self, digest: &str) -> Result<Option<String>, Error> {
        self.serving_reads.sites.inc();
        self.in_time(
            sqlx::query_scalar("SELECT site FROM sitemap_site_tokens WHERE digest = $1")
                .bind(digest)
                .fetch_optional(&self.pool),
        )
        .await
    }

    /// Stores a token's digest for the site `name`.
    pub(crate) async fn add_site_token(
        &self,
        name: &str,
        digest: &str,
    ) -> Result<(), SiteWriteError> {
        let added = sqlx::query(
            "INSERT INTO sitemap_site_tokens (digest, site)
             SELECT $2, site FROM sitemap_sites WHERE site = $1",
        )
        .bind(name)
        .bind(digest)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if added == 0 {
            return Err(SiteWriteError::NoSuchSite(name.to_owned()));
        }
        Ok(())
    }

    /// The digests of the site `name`'s tokens, with when each was minted.
    pub(crate) async fn site_tokens(
        &self,
        name: &str,
    ) -> Result<Vec<(String, OffsetDateTime)>, Error> {
        Ok(sqlx::query_as(
            "SELECT digest, created_at FROM sitemap_site_tokens WHERE site = $1 ORDER BY created_at, digest",
        )
        .bind(name)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Revokes the site `name`'s token of `digest`; whether it had one.
    pub(crate) async fn revoke_site_token(&self, name: &str, digest: &str) -> Result<bool, Error> {
        let revoked =
            sqlx::query("DELETE FROM sitemap_site_tokens WHERE site = $1 AND digest = $2")
                .bind(name)
                .bind(digest)
                .execute(&self.pool)
                .await?
                .rows_affected();
        Ok(revoked > 0)
    }
}

/// The settings in which `stored` differs from `wanted`, by name.
fn differences(stored: &Site, wanted: &Site) -> Vec<&'static str> {
    [
        ("base_url", stored.base_url != wanted.base_url),
        ("robots_txt", stored.robots_txt != wanted.robots_txt),
        (
            "include_subfolder_sites",
            stored.include_subfolder_sites != wanted.include_subfolder_sites,
        ),
        ("indexnow_key", stored.indexnow_key != wanted.indexnow_key),
        ("index_format", stored.index_format != wanted.index_format),
        ("nested_index", stored.nested_index != wanted.nested_index),
        ("robots_check", stored.robots_check != wanted.robots_check),
        (
            "robots_check_agents",
            stored.robots_check_agents != wanted.robots_check_agents,
        ),
        ("audit", stored.audit != wanted.audit),
    ]
    .into_iter()
    .filter_map(|(field, differs)| differs.then_some(field))
    .collect()
}
