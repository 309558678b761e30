//! What the write API answers with, and its OpenAPI document, generated
//! from the handlers' own annotations so the two cannot drift apart.

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::http::error::{Problem, RecordError};
use crate::ingest::batch::{KeyFields, RecordKey};
use crate::ingest::validate::RawRecord;
use crate::site::{IndexFormat, SiteSpec};
use crate::sitemap::extensions::Alternate;
use crate::sitemap::name::IndexFile;
use crate::store::{ClusterStats, ImportCounts, SiteStats, StoredRecord, StoredSite};

/// What an upsert did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct WriteSummary {
    pub(crate) received: u64,
    pub(crate) inserted: u64,
    pub(crate) updated: u64,
    /// Records identical to their row: nothing written, no lastmod moved.
    pub(crate) unchanged: u64,
}

impl WriteSummary {
    pub(super) fn new(received: usize, counts: ImportCounts) -> Self {
        WriteSummary {
            received: received as u64,
            inserted: counts.inserted,
            updated: counts.updated,
            unchanged: counts.unchanged,
        }
    }
}

/// What a delete did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeleteSummary {
    pub(crate) received: u64,
    pub(crate) deleted: u64,
    /// Locs that had no row.
    pub(crate) absent: u64,
}

/// One stored record, and where it is served.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RecordView {
    /// The record, as the API takes it; `alternates` are the hreflang links
    /// its entry carries: every member of its cluster, itself included.
    #[serde(flatten)]
    pub(crate) record: RawRecord,
    /// When the row last changed.
    #[schema(format = DateTime)]
    pub(crate) updated_at: String,
    /// The page it is served on; null when it is left out (see skip_reason).
    pub(crate) page: Option<i32>,
    /// The absolute URL of that page.
    pub(crate) sitemap: Option<String>,
    /// Why the row is left out of every sitemap, if it is.
    pub(crate) skip_reason: Option<String>,
    /// Why its cluster's links are not served, if they are not.
    pub(crate) alternates_problem: Option<String>,
}

impl RecordView {
    pub(super) fn new(record: StoredRecord, sitemap: Option<String>) -> Self {
        let json = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
        let alternates: Vec<Alternate> =
            match (&record.alternates_problem, record.hreflangs, record.hrefs) {
                (None, Some(hreflangs), Some(hrefs)) => hreflangs
                    .into_iter()
                    .zip(hrefs)
                    .map(|(hreflang, href)| Alternate { hreflang, href })
                    .collect(),
                _ => Vec::new(),
            };
        RecordView {
            record: RawRecord {
                loc: Some(record.loc),
                lastmod: record.lastmod.map(rfc3339),
                changefreq: record.changefreq,
                priority: record.priority.map(|priority| priority.to_string()),
                section: Some(record.section),
                site: Some(record.site),
                alternates: serde_json::to_value(alternates).ok(),
                images: json(record.images),
                videos: json(record.videos),
                news: json(record.news),
                visible_from: record.visible_from.map(rfc3339),
                visible_until: record.visible_until.map(rfc3339),
            },
            updated_at: rfc3339(record.updated_at),
            page: record.page,
            sitemap,
            skip_reason: record.skip_reason,
            alternates_problem: record.alternates_problem,
        }
    }
}

/// Counts per site, section and page.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Stats {
    pub(crate) sites: Vec<SiteView>,
    pub(crate) hreflang: HreflangView,
}

/// The hreflang clusters. A cluster whose input is incomplete or
/// conflicting (a URL two clusters claim, one hreflang on two URLs, a single
/// member) is served without links, never half-right.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct HreflangView {
    pub(crate) clusters: i64,
    pub(crate) with_problems: i64,
    /// Up to ten of them, by name.
    pub(crate) problems: Vec<ClusterProblem>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ClusterProblem {
    pub(crate) cluster: String,
    pub(crate) problem: String,
}

/// The crawler ledger: each sitemap file as each crawler last took it.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CrawlerLedger {
    pub(crate) files: Vec<CrawledFile>,
}

/// One file of one site as one crawler took it. `crawler` is a verified
/// family (googlebot, bingbot, yandex, applebot, duckduckbot, baiduspider,
/// petalbot, seznambot, naver), `unverified` (a family's user agent from an
/// address not verified as the family's) or `other`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CrawledFile {
    pub(crate) site: String,
    pub(crate) file: String,
    /// Its URL, under the site's base URL.
    pub(crate) url: String,
    pub(crate) crawler: String,
    pub(crate) verified: bool,
    pub(crate) first_fetch: String,
    pub(crate) last_fetch: String,
    pub(crate) last_status: i32,
    /// The lastmod of the version the last fetch served (none for an
    /// error).
    pub(crate) served_version: Option<String>,
    /// The lastmod of the version served now (none: not served now).
    pub(crate) current_version: Option<String>,
    /// Whether the last fetch served the version served now.
    pub(crate) holds_current: bool,
    pub(crate) fetches: i64,
    /// Body bytes sent, over all fetches.
    pub(crate) bytes: i64,
}

impl CrawledFile {
    pub(super) fn new(holding: &crate::http::ledger::Holding, base_url: &str) -> Self {
        let row = &holding.row;
        CrawledFile {
            site: row.site.clone(),
            file: row.file.clone(),
            url: format!("{base_url}{}", row.file),
            crawler: row.crawler.clone(),
            verified: row.verified,
            first_fetch: rfc3339(row.first_fetch),
            last_fetch: rfc3339(row.last_fetch),
            last_status: row.last_status,
            served_version: row.served_version.map(rfc3339),
            current_version: holding.current_version.map(rfc3339),
            holds_current: holding.holds_current(),
            fetches: row.fetches,
            bytes: row.bytes,
        }
    }
}

/// Extension entries, counted over pages.
#[derive(Debug, Default, Clone, Copy, Serialize, ToSchema)]
pub(super) struct ExtensionCounts {
    pub(crate) images: i64,
    pub(crate) videos: i64,
    /// `xhtml:link` alternates, one per link served.
    pub(crate) alternates: i64,
}

impl std::iter::Sum for ExtensionCounts {
    fn sum<I: Iterator<Item = ExtensionCounts>>(counts: I) -> ExtensionCounts {
        counts.fold(ExtensionCounts::default(), |sum, c| ExtensionCounts {
            images: sum.images + c.images,
            videos: sum.videos + c.videos,
            alternates: sum.alternates + c.alternates,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SiteView {
    pub(crate) site: String,
    /// URLs served, over all sections.
    pub(crate) urls: i64,
    /// Rows left out of the sitemaps.
    pub(crate) skipped: i64,
    /// Rows written with a lastmod later than the fold that placed them:
    /// served with the moment of that fold (`lastmod-in-future`).
    pub(crate) lastmods_in_future: i64,
    /// Rows whose loc the site's robots.txt disallows for one of its
    /// checked agents: left out (`robots-disallowed`, counted in
    /// `skipped` too), or listed where its `robots_check` is `report`.
    pub(crate) robots_disallowed: i64,
    pub(crate) extensions: ExtensionCounts,
    /// Articles in its news sitemaps: those of the last 48 hours.
    pub(crate) news_articles: i64,
    /// Its audited URLs by what their last check found (`ok`, `redirect`,
    /// `not-found`, `gone`, `noindex`, `canonical-elsewhere`, `error`).
    pub(crate) audit: std::collections::BTreeMap<String, i64>,
    pub(crate) sections: Vec<SectionView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SectionView {
    /// `""` is the default section.
    pub(crate) section: String,
    pub(crate) urls: i64,
    pub(crate) skipped: i64,
    pub(crate) lastmods_in_future: i64,
    pub(crate) robots_disallowed: i64,
    pub(crate) extensions: ExtensionCounts,
    pub(crate) pages: Vec<PageView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PageView {
    pub(crate) page: i32,
    pub(crate) urls: i32,
    /// Bytes reserved for its entries: an upper bound of its size.
    pub(crate) bytes: i64,
    #[schema(format = DateTime)]
    pub(crate) lastmod: String,
    /// The page's absolute URL.
    pub(crate) sitemap: String,
    pub(crate) extensions: ExtensionCounts,
}

impl Stats {
    /// `sitemap_of(site, section, page)` is a page's URL.
    pub(super) fn new(
        sites: Vec<SiteStats>,
        clusters: ClusterStats,
        sitemap_of: impl Fn(&str, &str, i32) -> String,
    ) -> Self {
        let sites = sites
            .into_iter()
            .map(|site| {
                let sections: Vec<SectionView> = site
                    .sections
                    .into_iter()
                    .map(|section| {
                        let pages: Vec<PageView> = section
                            .pages
                            .into_iter()
                            .map(|p| PageView {
                                page: p.page,
                                urls: p.url_count,
                                bytes: p.bytes,
                                lastmod: rfc3339(p.lastmod),
                                sitemap: sitemap_of(&site.site, &section.section, p.page),
                                extensions: ExtensionCounts {
                                    images: p.images,
                                    videos: p.videos,
                                    alternates: p.alternates,
                                },
                            })
                            .collect();
                        SectionView {
                            urls: pages.iter().map(|p| i64::from(p.urls)).sum(),
                            skipped: section.skipped,
                            lastmods_in_future: section.lastmods_in_future,
                            robots_disallowed: section.robots_disallowed,
                            extensions: pages.iter().map(|p| p.extensions).sum(),
                            pages,
                            section: section.section,
                        }
                    })
                    .collect();
                SiteView {
                    urls: sections.iter().map(|s| s.urls).sum(),
                    skipped: sections.iter().map(|s| s.skipped).sum(),
                    lastmods_in_future: sections.iter().map(|s| s.lastmods_in_future).sum(),
                    robots_disallowed: sections.iter().map(|s| s.robots_disallowed).sum(),
                    extensions: sections.iter().map(|s| s.extensions).sum(),
                    news_articles: site.news_articles,
                    audit: site.audit,
                    site: site.site,
                    sections,
                }
            })
            .collect();
        Stats {
            sites,
            hreflang: HreflangView {
                clusters: clusters.clusters,
                with_problems: clusters.with_problems,
                problems: clusters
                    .examples
                    .into_iter()
                    .map(|(cluster, problem)| ClusterProblem { cluster, problem })
                    .collect(),
            },
        }
    }
}

/// A site as stored.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SiteDocument {
    /// The site's name: what records' `site` names.
    pub(crate) name: String,
    #[serde(flatten)]
    pub(crate) settings: SiteSpec,
    /// Its index, as robots.txt announces it.
    pub(crate) index: String,
    #[schema(format = DateTime)]
    pub(crate) created_at: String,
    #[schema(format = DateTime)]
    pub(crate) updated_at: String,
}

impl From<StoredSite> for SiteDocument {
    fn from(entry: StoredSite) -> Self {
        let site = &entry.site;
        SiteDocument {
            name: site.name.clone(),
            settings: SiteSpec::of(site),
            index: format!(
                "{}{}",
                site.base_url,
                IndexFile::Root.file_name(site.index_format.encoding())
            ),
            created_at: rfc3339(entry.created_at),
            updated_at: rfc3339(entry.updated_at),
        }
    }
}

/// A page of sites, by name.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SiteList {
    pub(crate) sites: Vec<SiteDocument>,
    /// Pass as `after` for the next page; null on the last.
    pub(crate) next: Option<String>,
}

/// What removing a site did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SiteRemoved {
    pub(crate) site: String,
    /// URL rows the purge deleted.
    pub(crate) deleted_rows: u64,
}

/// A token, shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct MintedToken {
    pub(crate) site: String,
    /// Send as `Authorization: Bearer <token>`; the service keeps only its
    /// digest.
    pub(crate) token: String,
    /// What revokes it: `DELETE /api/v1/sites/{site}/tokens/{digest}`.
    pub(crate) digest: String,
}

/// A site's tokens, by digest.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TokenList {
    pub(crate) site: String,
    pub(crate) tokens: Vec<TokenView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TokenView {
    pub(crate) digest: String,
    #[schema(format = DateTime)]
    pub(crate) created_at: String,
}

impl TokenView {
    pub(super) fn new(digest: String, created_at: OffsetDateTime) -> Self {
        TokenView {
            digest,
            created_at: rfc3339(created_at),
        }
    }
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// The write API's OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "sitemapd write API",
        description = "Upsert, delete and look up the page records sitemaps are built from, \
                       and manage the sites. Every operation needs `Authorization: Bearer <token>`: \
                       an operator's token may do everything, a site's token only read and write \
                       that site's records and read its stats (anything else is refused with 403). \
                       A batch is applied whole or not at all."
    ),
    paths(
        super::put_urls,
        super::delete_urls,
        super::get_url,
        super::stats,
        super::crawlers,
        super::sites::list_sites,
        super::sites::get_site,
        super::sites::put_site,
        super::sites::delete_site,
        super::sites::mint_token,
        super::sites::list_tokens,
        super::sites::revoke_token
    ),
    components(schemas(
        SiteSpec,
        IndexFormat,
        SiteDocument,
        SiteList,
        SiteRemoved,
        MintedToken,
        TokenList,
        TokenView,
        RawRecord,
        RecordKey,
        KeyFields,
        WriteSummary,
        DeleteSummary,
        RecordView,
        Stats,
        SiteView,
        SectionView,
        PageView,
        ExtensionCounts,
        HreflangView,
        ClusterProblem,
        CrawlerLedger,
        CrawledFile,
        Alternate,
        Problem,
        RecordError
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub(crate) struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}
