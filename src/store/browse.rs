//! Reads for the HTML view (`sitemaps.html`): a site's pages with their
//! sizes, one screen of a page's URLs, where one URL is served, and what is
//! left out and why.
//!
//! Each reads only what it shows, so the view stays fast on a table of any
//! size: the page summaries (O(pages)), one index range of a page's
//! placements, one row by `(site, loc)`, and the skipped rows' partial index.

use time::OffsetDateTime;

use super::records::PageStats;
use super::{Error, Store};

/// A page of a site's section, with its counts.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct SectionPage {
    pub(crate) section: String,
    #[sqlx(flatten)]
    pub(crate) stats: PageStats,
}

/// A news sitemap listed in a site's index.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct NewsFile {
    pub(crate) file: i32,
    pub(crate) url_count: i32,
    pub(crate) lastmod: OffsetDateTime,
}

/// One URL of a page as the view shows it: its fields and how many
/// extension entries it carries.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct BrowsedUrl {
    pub(crate) loc: String,
    pub(crate) lastmod: Option<OffsetDateTime>,
    pub(crate) changefreq: Option<String>,
    pub(crate) priority: Option<f32>,
    pub(crate) images: i32,
    pub(crate) videos: i32,
    pub(crate) alternates: i32,
    pub(crate) news: bool,
}

/// Where a row of `(site, loc)` is, if it exists.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct Located {
    pub(crate) section: String,
    /// The page it is served on; none when it is left out or not yet placed.
    pub(crate) page: Option<i32>,
    /// How many of its page's URLs come before it.
    pub(crate) position: i64,
    pub(crate) skip_reason: Option<String>,
}

/// Rows left out of a site's sitemaps for one reason.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct SkipGroup {
    pub(crate) reason: String,
    pub(crate) rows: i64,
    /// The first few of them, oldest rows first.
    pub(crate) examples: Vec<String>,
    /// The robots.txt rule that disallows each example, where one does.
    pub(crate) example_rules: Vec<Option<String>>,
}

/// Examples shown per skip reason.
const SKIP_EXAMPLES: i64 = 5;
/// Distinct skip reasons shown, most frequent first.
const SKIP_REASONS: i64 = 50;

impl Store {
    /// The site's non-empty pages with their counts, in index order.
    pub(crate) async fn site_pages(&self, site: &str) -> Result<Vec<SectionPage>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT section, page, url_count, bytes, lastmod, images, videos, alternates
                 FROM sitemap_pages WHERE site = $1 AND url_count > 0
                 ORDER BY section, page",
            )
            .bind(site)
            .fetch_all(pool)
        })
        .await
    }

    /// The news sitemaps the site's index lists.
    pub(crate) async fn news_files(&self, site: &str) -> Result<Vec<NewsFile>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT file, url_count, lastmod FROM sitemap_news_files
                 WHERE site = $1 AND listed ORDER BY file",
            )
            .bind(site)
            .fetch_all(pool)
        })
        .await
    }

    /// `limit` URLs of a page from the `skip`-th on, in the page's order.
    pub(crate) async fn browse_page(
        &self,
        site: &str,
        section: &str,
        page: i32,
        skip: i64,
        limit: i64,
    ) -> Result<Vec<BrowsedUrl>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT u.loc,
                        sitemap_served_lastmod(u.lastmod, c.written_lastmod, c.served_lastmod)
                            AS lastmod,
                        u.changefreq, u.priority,
                        coalesce(jsonb_array_length(u.images), 0) AS images,
                        coalesce(jsonb_array_length(u.videos), 0) AS videos,
                        coalesce(cardinality(k.hreflangs), 0) AS alternates,
                        u.news IS NOT NULL AS news
                 FROM sitemap_placed p JOIN sitemap_urls u ON u.id = p.id
                 LEFT JOIN sitemap_clusters k ON k.cluster = p.cluster AND k.problem IS NULL
                 LEFT JOIN sitemap_lastmod_clamps c ON c.id = u.id
                 WHERE p.site = $1 AND p.section = $2 AND p.page = $3
                   AND u.site = p.site AND u.section = p.section
                   AND sitemap_loc_hash(u.loc) = p.loc_hash
                 ORDER BY p.id OFFSET $4 LIMIT $5",
            )
            .bind(site)
            .bind(section)
            .bind(page)
            .bind(skip)
            .bind(limit)
            .fetch_all(pool)
        })
        .await
    }

    /// Where the row of `(site, loc)` is served, if the row exists.
    pub(crate) async fn locate(&self, site: &str, loc: &str) -> Result<Option<Located>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT u.section, p.page, p.skip_reason,
                        CASE WHEN p.page IS NULL THEN 0 ELSE
                            (SELECT count(*) FROM sitemap_placed q
                             WHERE q.site = p.site AND q.section = p.section
                               AND q.page = p.page AND q.id < p.id)
                        END AS position
                 FROM sitemap_urls u
                 LEFT JOIN LATERAL sitemap_placement_of(u.id) p
                     ON p.site = u.site AND p.section = u.section AND p.loc_hash = sitemap_loc_hash(u.loc)
                 WHERE u.site = $1 AND u.loc = $2",
            )
            .bind(site)
            .bind(loc)
            .fetch_optional(pool)
        })
        .await
    }

    /// The site's rows left out of its sitemaps, grouped by reason, most
    /// frequent first, with a few examples each; and, listed though
    /// reported: as `lastmod-in-future`, those served with the moment they
    /// were placed instead of the future lastmod they were written with,
    /// and as `robots-disallowed-listed`, those its robots.txt disallows
    /// where the site reports them.
    pub(crate) async fn skip_groups(&self, site: &str) -> Result<Vec<SkipGroup>, Error> {
        self.serving_read(|pool| {
            sqlx::query_as(
                "SELECT * FROM (
                     SELECT r.reason, r.rows, e.examples, e.example_rules
                     FROM (SELECT skip_reason AS reason, count(*) AS rows
                           FROM sitemap_placements
                           WHERE site = $1 AND skip_reason IS NOT NULL
                           GROUP BY skip_reason) r
                     CROSS JOIN LATERAL (
                         SELECT array_agg(x.loc ORDER BY x.id) AS examples,
                                array_agg(x.robots_rule ORDER BY x.id) AS example_rules
                         FROM (SELECT q.id, u.loc, q.robots_rule FROM sitemap_placements q
                               JOIN sitemap_urls u ON u.id = q.id
                               WHERE q.site = $1 AND q.skip_reason = r.reason
                               ORDER BY q.id LIMIT $2) x) e
                     UNION ALL
                     SELECT 'robots-disallowed-listed', n.rows, e.examples, e.example_rules
                     FROM (SELECT count(*) AS rows FROM sitemap_placements
                           WHERE site = $1 AND robots_rule IS NOT NULL AND page IS NOT NULL) n
                     CROSS JOIN LATERAL (
                         SELECT array_agg(x.loc ORDER BY x.id) AS examples,
                                array_agg(x.robots_rule ORDER BY x.id) AS example_rules
                         FROM (SELECT q.id, u.loc, q.robots_rule FROM sitemap_placements q
                               JOIN sitemap_urls u ON u.id = q.id
                               WHERE q.site = $1 AND q.robots_rule IS NOT NULL AND q.page IS NOT NULL
                               ORDER BY q.id LIMIT $2) x) e
                     WHERE n.rows > 0
                     UNION ALL
                     SELECT 'audit: ' || n.finding, n.rows, e.examples, e.example_rules
                     FROM (SELECT finding, urls AS rows FROM sitemap_audit_finding_counts
                           WHERE site = $1 AND finding <> 'ok') n
                     CROSS JOIN LATERAL (
                         SELECT array_agg(x.loc ORDER BY x.id) AS examples,
                                array_agg(x.said ORDER BY x.id) AS example_rules
                         FROM (SELECT a.id, a.loc,
                                      concat_ws(' ', a.status::text, '→ ' || a.location,
                                                'canonical ' || a.canonical, a.detail) AS said
                               FROM sitemap_audits a
                               WHERE a.site = $1 AND a.finding = n.finding
                               ORDER BY a.id LIMIT $2) x) e
                     UNION ALL
                     SELECT 'lastmod-in-future', n.rows,
                            ARRAY(SELECT u.loc FROM sitemap_lastmod_clamps c
                                  JOIN sitemap_urls u ON u.id = c.id AND u.lastmod = c.written_lastmod
                                  WHERE c.site = $1 ORDER BY c.id LIMIT $2),
                            '{}'::text[]
                     FROM (SELECT coalesce(sum(clamps), 0)::bigint AS rows
                           FROM sitemap_lastmod_clamp_counts WHERE site = $1) n
                     WHERE n.rows > 0
                 ) g
                 ORDER BY g.rows DESC, g.reason LIMIT $3",
            )
            .bind(site)
            .bind(SKIP_EXAMPLES)
            .bind(SKIP_REASONS)
            .fetch_all(pool)
        })
        .await
    }
}
