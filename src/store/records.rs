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

use super::{Error, Store};

/// A row as stored, with where it is served (or why it is not).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredRecord {
    pub site: String,
    pub section: String,
    pub loc: String,
    pub lastmod: Option<OffsetDateTime>,
    pub changefreq: Option<String>,
    pub priority: Option<f32>,
    pub updated_at: OffsetDateTime,
    /// `None` when the row is left out of every sitemap.
    pub page: Option<i32>,
    pub skip_reason: Option<String>,
    /// The extensions as stored, JSON.
    pub images: Option<String>,
    pub videos: Option<String>,
    pub news: Option<String>,
    /// The links of the row's hreflang cluster as folded, and why they are
    /// not served, if they are not.
    pub hreflangs: Option<Vec<String>>,
    pub hrefs: Option<Vec<String>>,
    pub alternates_problem: Option<String>,
}

/// One site's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteStats {
    pub site: String,
    pub sections: Vec<SectionStats>,
    /// Articles its news sitemaps list now.
    pub news_articles: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionStats {
    pub section: String,
    /// Rows left out of the sitemaps.
    pub skipped: i64,
    pub pages: Vec<PageStats>,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PageStats {
    pub page: i32,
    pub url_count: i32,
    /// Bytes reserved for the page's entries (an upper bound of its size).
    pub bytes: i64,
    pub lastmod: OffsetDateTime,
    /// Extension entries its URLs carry.
    pub images: i64,
    pub videos: i64,
    pub alternates: i64,
}

/// The hreflang clusters, and those served without links because their
/// input is incomplete or conflicting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub clusters: i64,
    pub with_problems: i64,
    /// Some of them, `(cluster, problem)`, by name.
    pub examples: Vec<(String, String)>,
}

impl Store {
    /// The row of `(site, loc)`, if any.
    pub async fn record(&self, site: &str, loc: &str) -> Result<Option<StoredRecord>, Error> {
        Ok(sqlx::query_as(
            "SELECT u.site, u.section, u.loc, u.lastmod, u.changefreq, u.priority, u.updated_at,
                    p.page, p.skip_reason,
                    u.images::text AS images, u.videos::text AS videos, u.news::text AS news,
                    k.hreflangs, k.hrefs, k.problem AS alternates_problem
             FROM sitemap_urls u
             LEFT JOIN LATERAL sitemap_placement_of(u.id) p
                 ON p.site = u.site AND p.section = u.section AND p.loc_hash = sitemap_loc_hash(u.loc)
             LEFT JOIN sitemap_clusters k ON k.cluster = u.hreflang_cluster
             WHERE u.site = $1 AND u.loc = $2",
        )
        .bind(site)
        .bind(loc)
        .fetch_optional(&self.read)
        .await?)
    }

    /// Deletes the rows of `(sites[i], locs[i])` in one statement (so all or
    /// none); returns how many existed.
    pub async fn delete_records(&self, sites: &[String], locs: &[String]) -> Result<u64, Error> {
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

    /// Every site's sections and pages with their counts, in index order,
    /// sections that only hold skipped rows included.
    pub async fn stats(&self) -> Result<(Vec<SiteStats>, ClusterStats), Error> {
        let mut tx = self.read.begin().await?;
        // One snapshot for both reads, so pages and skips agree.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await?;
        let pages: Vec<(String, String, PageStats)> = sqlx::query_as::<_, PageRow>(
            "SELECT site, section, page, url_count, bytes, lastmod, images, videos, alternates
             FROM sitemap_pages ORDER BY site, section, page",
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|row| (row.site, row.section, row.stats))
        .collect();
        let skipped: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT site, section, count(*) FROM sitemap_placements
             WHERE skip_reason IS NOT NULL GROUP BY site, section",
        )
        .fetch_all(&mut *tx)
        .await?;
        let (clusters, with_problems): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM sitemap_clusters),
                    (SELECT count(*) FROM sitemap_clusters WHERE problem IS NOT NULL)",
        )
        .fetch_one(&mut *tx)
        .await?;
        let news: Vec<(String, i64)> = sqlx::query_as(
            "SELECT site, sum(url_count)::bigint FROM sitemap_news_files GROUP BY site",
        )
        .fetch_all(&mut *tx)
        .await?;
        let examples = sqlx::query_as(
            "SELECT cluster, problem FROM sitemap_clusters WHERE problem IS NOT NULL
             ORDER BY cluster LIMIT 10",
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let clusters = ClusterStats {
            clusters,
            with_problems,
            examples,
        };
        Ok((group_stats(pages, skipped, news), clusters))
    }

    /// How many hreflang clusters are served without links, for the metrics.
    pub async fn cluster_problems(&self) -> Result<i64, Error> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM sitemap_clusters WHERE problem IS NOT NULL")
                .fetch_one(&self.pool)
                .await?,
        )
    }
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
    let news: BTreeMap<String, i64> = news.into_iter().collect();
    sites
        .into_iter()
        .map(|(site, sections)| SiteStats {
            news_articles: news.get(&site).copied().unwrap_or(0),
            site,
            sections: sections.into_values().collect(),
        })
        .collect()
}
