//! Single records and counts, for the write API: one record with its page, a
//! batch of deletions, and what each site, section and page holds.
//!
//! Lookups and stats read where the sitemaps do (a replica, if one is
//! configured); deletions go to the primary.
//!
//! Counts come from the page summaries (O(pages)), and skipped rows from
//! their partial index, so stats stay cheap on a table of any size.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use sqlx::PgPool;

use super::{Error, Store};

/// A row as stored, with where it is served (or why it is not).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct StoredRecord {
    pub(crate) site: String,
    pub(crate) section: String,
    pub(crate) loc: String,
    pub(crate) lastmod: Option<OffsetDateTime>,
    pub(crate) changefreq: Option<String>,
    pub(crate) priority: Option<f32>,
    pub(crate) updated_at: OffsetDateTime,
    /// `None` when the row is left out of every sitemap.
    pub(crate) page: Option<i32>,
    pub(crate) skip_reason: Option<String>,
    /// The extensions as stored, JSON.
    pub(crate) images: Option<String>,
    pub(crate) videos: Option<String>,
    pub(crate) news: Option<String>,
    /// The links of the row's hreflang cluster as folded, and why they are
    /// not served, if they are not.
    pub(crate) hreflangs: Option<Vec<String>>,
    pub(crate) hrefs: Option<Vec<String>>,
    pub(crate) alternates_problem: Option<String>,
    pub(crate) visible_from: Option<OffsetDateTime>,
    pub(crate) visible_until: Option<OffsetDateTime>,
}

/// One site's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SiteStats {
    pub(crate) site: String,
    pub(crate) sections: Vec<SectionStats>,
    /// Articles its news sitemaps list now.
    pub(crate) news_articles: i64,
    /// Its audited URLs, by finding.
    pub(crate) audit: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SectionStats {
    pub(crate) section: String,
    /// Rows left out of the sitemaps.
    pub(crate) skipped: i64,
    /// Rows served with the moment they were placed instead of the future
    /// lastmod they were written with.
    pub(crate) lastmods_in_future: i64,
    /// Rows whose loc robots.txt disallows, left out or listed.
    pub(crate) robots_disallowed: i64,
    pub(crate) pages: Vec<PageStats>,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct PageStats {
    pub(crate) page: i32,
    pub(crate) url_count: i32,
    /// Bytes reserved for the page's entries (an upper bound of its size).
    pub(crate) bytes: i64,
    pub(crate) lastmod: OffsetDateTime,
    /// Extension entries its URLs carry.
    pub(crate) images: i64,
    pub(crate) videos: i64,
    pub(crate) alternates: i64,
}

/// The hreflang clusters, and those served without links because their
/// input is incomplete or conflicting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClusterStats {
    pub(crate) clusters: i64,
    pub(crate) with_problems: i64,
    /// Some of them, `(cluster, problem)`, by name.
    pub(crate) examples: Vec<(String, String)>,
}

impl Store {
    /// The row of `(site, loc)`, if any.
    pub(crate) async fn record(
        &self,
        site: &str,
        loc: &str,
    ) -> Result<Option<StoredRecord>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
            "SELECT u.site, u.section, u.loc, u.lastmod, u.changefreq, u.priority, u.updated_at,
                    p.page, p.skip_reason,
                    u.images::text AS images, u.videos::text AS videos, u.news::text AS news,
                    k.hreflangs, k.hrefs, k.problem AS alternates_problem,
                    u.visible_from, u.visible_until
             FROM sitemap_urls u
             LEFT JOIN LATERAL sitemap_placement_of(u.id) p
                 ON p.site = u.site AND p.section = u.section AND p.loc_hash = sitemap_loc_hash(u.loc)
             LEFT JOIN sitemap_clusters k ON k.cluster = u.hreflang_cluster
             WHERE u.site = $1 AND u.loc = $2",
        )
        .bind(site)
        .bind(loc)
        .fetch_optional(pool)
        })
        .await
    }

    /// Deletes the rows of `(sites[i], locs[i])` in one statement (so all or
    /// none); returns how many existed.
    pub(crate) async fn delete_records(
        &self,
        sites: &[String],
        locs: &[String],
    ) -> Result<u64, Error> {
        Ok(sqlx::query(
            "DELETE FROM sitemap_urls u
             USING unnest($1::text[], $2::text[]) AS d(site, loc)
             WHERE u.site = d.site AND u.loc = d.loc",
        )
        .bind(sites)
        .bind(locs)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Every site's sections and pages with their counts (only `site`'s,
    /// when given), in index order, sections that only hold skipped rows
    /// included.
    /// Read in one transaction on the reads' server; one the standby
    /// failed is read again on the primary, as [`Store::serving_read`] does.
    pub(crate) async fn stats(
        &self,
        site: Option<&str>,
    ) -> Result<(Vec<SiteStats>, ClusterStats), Error> {
        let (pool, on_standby) = self.read.pool_for_read();
        match stats_on(pool, site).await {
            Err(error) if on_standby && error.is_the_servers() => {
                tracing::debug!(%error, "stats failed on the standby: read on the primary");
                let primary = self.read.primary();
                stats_on(primary, site)
                    .await
                    .map_err(|error| error.on(primary, false))
            }
            result => result.map_err(|error| error.on(pool, on_standby)),
        }
    }
}

/// [`Store::stats`] on `pool`.
async fn stats_on(
    pool: &PgPool,
    site: Option<&str>,
) -> Result<(Vec<SiteStats>, ClusterStats), Error> {
    let mut tx = pool.begin().await?;
    // One snapshot for every read, so pages and skips agree.
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await?;
    let pages: Vec<(String, String, PageStats)> = sqlx::query_as::<_, PageRow>(
        "SELECT site, section, page, url_count, bytes, lastmod, images, videos, alternates
         FROM sitemap_pages WHERE $1::text IS NULL OR site = $1
         ORDER BY site, section, page",
    )
    .bind(site)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|row| (row.site, row.section, row.stats))
    .collect();
    let skipped: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT site, section, count(*) FROM sitemap_placements
         WHERE skip_reason IS NOT NULL AND ($1::text IS NULL OR site = $1)
         GROUP BY site, section",
    )
    .bind(site)
    .fetch_all(&mut *tx)
    .await?;
    let in_future: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT site, section, clamps FROM sitemap_lastmod_clamp_counts
         WHERE $1::text IS NULL OR site = $1",
    )
    .bind(site)
    .fetch_all(&mut *tx)
    .await?;
    let robots_disallowed: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT site, section, count(*) FROM sitemap_placements
         WHERE robots_rule IS NOT NULL AND ($1::text IS NULL OR site = $1)
         GROUP BY site, section",
    )
    .bind(site)
    .fetch_all(&mut *tx)
    .await?;
    // A site's clusters are those its rows name.
    macro_rules! clusters {
        () => {
            "(SELECT k.* FROM sitemap_clusters k
              WHERE $1::text IS NULL OR EXISTS (
                  SELECT 1 FROM sitemap_urls u
                  WHERE u.hreflang_cluster = k.cluster AND u.site = $1)) c"
        };
    }
    let (clusters_count, with_problems): (i64, i64) = sqlx::query_as(concat!(
        "SELECT count(*), count(*) FILTER (WHERE problem IS NOT NULL) FROM ",
        clusters!()
    ))
    .bind(site)
    .fetch_one(&mut *tx)
    .await?;
    let audit: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT site, finding, urls FROM sitemap_audit_finding_counts
         WHERE $1::text IS NULL OR site = $1",
    )
    .bind(site)
    .fetch_all(&mut *tx)
    .await?;
    let news: Vec<(String, i64)> = sqlx::query_as(
        "SELECT site, sum(url_count)::bigint FROM sitemap_news_files
         WHERE $1::text IS NULL OR site = $1 GROUP BY site",
    )
    .bind(site)
    .fetch_all(&mut *tx)
    .await?;
    let examples = sqlx::query_as(concat!(
        "SELECT cluster, problem FROM ",
        clusters!(),
        " WHERE problem IS NOT NULL ORDER BY cluster LIMIT 10"
    ))
    .bind(site)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let clusters = ClusterStats {
        clusters: clusters_count,
        with_problems,
        examples,
    };
    Ok((
        group_stats(pages, skipped, in_future, robots_disallowed, audit, news),
        clusters,
    ))
}

#[derive(sqlx::FromRow)]
struct PageRow {
    site: String,
    section: String,
    #[sqlx(flatten)]
    stats: PageStats,
}

fn group_stats(
    pages: Vec<(String, String, PageStats)>,
    skipped: Vec<(String, String, i64)>,
    in_future: Vec<(String, String, i64)>,
    robots_disallowed: Vec<(String, String, i64)>,
    audit: Vec<(String, String, i64)>,
    news: Vec<(String, i64)>,
) -> Vec<SiteStats> {
    type Sections = BTreeMap<String, SectionStats>;
    fn section(
        sites: &mut BTreeMap<String, Sections>,
        site: String,
        name: String,
    ) -> &mut SectionStats {
        sites
            .entry(site)
            .or_default()
            .entry(name.clone())
            .or_insert_with(|| SectionStats {
                section: name,
                skipped: 0,
                lastmods_in_future: 0,
                robots_disallowed: 0,
                pages: Vec::new(),
            })
    }
    let mut sites = BTreeMap::new();
    for (site, name, page) in pages {
        section(&mut sites, site, name).pages.push(page);
    }
    for (site, name, count) in skipped {
        section(&mut sites, site, name).skipped = count;
    }
    for (site, name, count) in in_future {
        section(&mut sites, site, name).lastmods_in_future = count;
    }
    for (site, name, count) in robots_disallowed {
        section(&mut sites, site, name).robots_disallowed = count;
    }
    let news: BTreeMap<String, i64> = news.into_iter().collect();
    let mut audits: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (site, finding, count) in audit {
        audits.entry(site).or_default().insert(finding, count);
    }
    sites
        .into_iter()
        .map(|(site, sections)| SiteStats {
            news_articles: news.get(&site).copied().unwrap_or(0),
            audit: audits.remove(&site).unwrap_or_default(),
            site,
            sections: sections.into_values().collect(),
        })
        .collect()
}
