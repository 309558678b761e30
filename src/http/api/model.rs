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
use crate::store::{ImportCounts, SiteStats, StoredRecord};

/// What an upsert did.
#[derive(Debug, Serialize, ToSchema)]
pub struct WriteSummary {
    pub received: u64,
    pub inserted: u64,
    pub updated: u64,
    /// Records identical to their row: nothing written, no lastmod moved.
    pub unchanged: u64,
}

impl WriteSummary {
    pub fn new(received: usize, counts: ImportCounts) -> Self {
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
pub struct DeleteSummary {
    pub received: u64,
    pub deleted: u64,
    /// Locs that had no row.
    pub absent: u64,
}

/// One stored record, and where it is served.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordView {
    pub site: String,
    pub section: String,
    pub loc: String,
    #[schema(format = DateTime)]
    pub lastmod: Option<String>,
    pub changefreq: Option<String>,
    pub priority: Option<f32>,
    /// When the row last changed.
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// The page it is served on; null when it is left out (see skip_reason).
    pub page: Option<i32>,
    /// The absolute URL of that page.
    pub sitemap: Option<String>,
    /// Why the row is left out of every sitemap, if it is.
    pub skip_reason: Option<String>,
}

impl RecordView {
    pub fn new(record: StoredRecord, sitemap: Option<String>) -> Self {
        RecordView {
            site: record.site,
            section: record.section,
            loc: record.loc,
            lastmod: record.lastmod.map(rfc3339),
            changefreq: record.changefreq,
            priority: record.priority,
            updated_at: rfc3339(record.updated_at),
            page: record.page,
            sitemap,
            skip_reason: record.skip_reason,
        }
    }
}

/// Counts per site, section and page.
#[derive(Debug, Serialize, ToSchema)]
pub struct Stats {
    pub sites: Vec<SiteView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SiteView {
    pub site: String,
    /// URLs served, over all sections.
    pub urls: i64,
    /// Rows left out of the sitemaps.
    pub skipped: i64,
    pub sections: Vec<SectionView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SectionView {
    /// `""` is the default section.
    pub section: String,
    pub urls: i64,
    pub skipped: i64,
    pub pages: Vec<PageView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PageView {
    pub page: i32,
    pub urls: i32,
    /// Bytes reserved for its entries: an upper bound of its size.
    pub bytes: i64,
    #[schema(format = DateTime)]
    pub lastmod: String,
    /// The page's absolute URL.
    pub sitemap: String,
}

impl Stats {
    /// `sitemap_of(site, section, page)` is a page's URL.
    pub fn new(sites: Vec<SiteStats>, sitemap_of: impl Fn(&str, &str, i32) -> String) -> Self {
        let sites = sites
            .into_iter()
            .map(|site| {
                let sections: Vec<SectionView> = site
                    .sections
                    .into_iter()
                    .map(|section| SectionView {
                        urls: section.pages.iter().map(|p| i64::from(p.url_count)).sum(),
                        skipped: section.skipped,
                        pages: section
                            .pages
                            .into_iter()
                            .map(|p| PageView {
                                page: p.page,
                                urls: p.url_count,
                                bytes: p.bytes,
                                lastmod: rfc3339(p.lastmod),
                                sitemap: sitemap_of(&site.site, &section.section, p.page),
                            })
                            .collect(),
                        section: section.section,
                    })
                    .collect();
                SiteView {
                    urls: sections.iter().map(|s| s.urls).sum(),
                    skipped: sections.iter().map(|s| s.skipped).sum(),
                    site: site.site,
                    sections,
                }
            })
            .collect();
        Stats { sites }
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
        description = "Upsert, delete and look up the page records sitemaps are built from. \
                       Every operation needs `Authorization: Bearer <token>`; a batch is applied \
                       whole or not at all."
    ),
    paths(super::put_urls, super::delete_urls, super::get_url, super::stats),
    components(schemas(
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
        Problem,
        RecordError
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

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
