//! Renders one page from the store into its compressed chunks.
//!
//! A page is read, written as XML and compressed whole, into memory, before
//! any of it is sent: the database connection goes back to the pool as soon
//! as the rows are read, however slowly a client then takes the page, and a
//! database failure part-way is answered `503` rather than a sitemap cut
//! short. Every form of a page is served from these chunks (an uncompressed
//! `.xml` is inflated from its gzip as the client reads it).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;
use crate::pages::cache::PageKey;
use crate::pages::codec::{CHUNK_BYTES, Sink};
use crate::pages::skips::SkipLog;
use crate::sitemap::extensions::{Alternates, Image, News, Video};
use crate::sitemap::name::NEWS_SECTION;
use crate::sitemap::{Extensions, LimitExceeded, Namespaces, UrlEntry, UrlsetWriter};
use crate::store::Store;

/// Why a page could not be (completely) rendered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RenderError {
    /// Every build slot stayed busy for the configured wait: shed.
    #[error("too many pages being built: shed")]
    Overloaded,
    #[error("reading the page's rows: {0}")]
    Database(#[from] crate::store::Error),
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    #[error("compressing the page: {0}")]
    Compress(#[from] std::io::Error),
    /// The runtime that builds pages shut down before this one was built.
    #[error("the service is stopping")]
    Stopping,
}

/// How pages are rendered: the service's settings that shape a page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenderOptions {
    pub(crate) max_urls: u32,
    pub(crate) max_bytes: u64,
    pub(crate) gzip_level: u32,
    pub(crate) lastmod_fallback: bool,
}

/// What rendering a page needs besides the page itself.
#[derive(Debug, Clone)]
pub(crate) struct Renderer {
    pub(crate) store: Store,
    pub(crate) options: RenderOptions,
    pub(crate) skips: Arc<SkipLog>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) slots: BuildSlots,
    /// The shared runtime, where pages are built: a build compresses for
    /// tens of milliseconds, which on a connection thread would hold up
    /// every other connection of that thread.
    pub(crate) runtime: tokio::runtime::Handle,
}

/// At most this many pages are built at once. A build that cannot get a
/// slot within the wait is shed (`503` with `Retry-After`), while cached
/// pages and `304`s keep flowing: load is shed where it costs database time.
#[derive(Debug, Clone)]
pub(crate) struct BuildSlots {
    slots: Arc<Semaphore>,
    wait: Duration,
}

impl BuildSlots {
    pub(crate) fn new(max_builds: usize, wait: Duration) -> BuildSlots {
        BuildSlots {
            slots: Arc::new(Semaphore::new(max_builds.max(1))),
            wait,
        }
    }

    async fn take(&self) -> Result<OwnedSemaphorePermit, RenderError> {
        tokio::time::timeout(self.wait, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| RenderError::Overloaded)?
            .map_err(|_| RenderError::Overloaded)
    }
}

/// Renders a whole page (`page`, in its codec) into memory, for the page
/// cache; `route` labels its metrics. The result is its compressor's
/// chunks as they came. A build slot is held while the page's rows are read
/// and written. A page is built whole before any byte of it is sent, so a
/// failure part-way is a clean `503`, never a cut-short sitemap.
pub(crate) async fn build_page(
    renderer: Renderer,
    page: PageKey,
    route: &'static str,
) -> Result<Arc<[Bytes]>, RenderError> {
    if page.section == NEWS_SECTION {
        return build_news(renderer, page, route).await;
    }
    let Renderer {
        store,
        options,
        skips,
        metrics,
        slots,
        runtime: _,
    } = renderer;
    let slot = slots.take().await?;
    let started = std::time::Instant::now();
    let (mut rows_read, mut left_out) = (0, 0);
    let mut chunks = Vec::new();
    let carried = store
        .page_extensions(&page.site, &page.section, page.page)
        .await?;
    let namespaces = Namespaces {
        xhtml: carried.alternates,
        image: carried.images,
        video: carried.videos,
        news: false,
    };
    let mut rows = std::pin::pin!(store.page_rows(&page.site, &page.section, page.page));
    let mut sink = Sink::new(page.codec, options.gzip_level)?;
    let mut xml = Vec::with_capacity(CHUNK_BYTES + crate::sitemap::writer::MAX_ENTRY_BYTES);
    let mut writer =
        UrlsetWriter::start_with(&mut xml, options.max_urls, options.max_bytes, namespaces);
    while let Some(row) = rows.try_next().await? {
        // Rows the schema checked parse; one that does not is served
        // without its extensions rather than failing its page.
        let images: Vec<Image> = parsed(row.images.as_deref());
        let videos: Vec<Video> = parsed(row.videos.as_deref());
        let entry = UrlEntry {
            loc: &row.loc,
            lastmod: row
                .lastmod
                .or(options.lastmod_fallback.then_some(row.updated_at)),
            changefreq: row.changefreq.as_deref(),
            priority: row.priority,
            extensions: Extensions {
                alternates: Alternates {
                    hreflangs: row.hreflangs.as_deref().unwrap_or_default(),
                    hrefs: row.hrefs.as_deref().unwrap_or_default(),
                },
                images: &images,
                videos: &videos,
                news: None,
                budget: usize::try_from(row.reserved).ok(),
            },
        };
        rows_read += 1;
        if let Some(reason) = writer.push(&mut xml, &entry)? {
            left_out += 1;
            skips.record(&page.site, row.id, &row.loc, reason);
        }
        if xml.len() >= CHUNK_BYTES {
            let chunk = sink.write(&mut xml)?;
            if !chunk.is_empty() {
                chunks.push(chunk);
            }
        }
    }
    drop(slot);
    let deferred = writer.deferred();
    writer.finish(&mut xml);
    chunks.push(sink.finish(&mut xml)?);
    if deferred > 0 {
        tracing::debug!(
            site = %page.site, section = %page.section, page = page.page, deferred,
            "entries served without extensions that changed since their page was folded"
        );
    }
    metrics.page_built(started.elapsed(), rows_read, left_out);
    metrics.body_bytes(route, chunks.iter().map(Bytes::len).sum());
    Ok(chunks.into())
}

/// Renders a news sitemap: the articles its site's last listing put in it
/// (a thousand at most, as few as the byte limit needs), each with its loc
/// and news element alone, as Google reads them.
async fn build_news(
    renderer: Renderer,
    page: PageKey,
    route: &'static str,
) -> Result<Arc<[Bytes]>, RenderError> {
    let slot = renderer.slots.take().await?;
    let started = std::time::Instant::now();
    let rows = renderer.store.news_rows(&page.site, page.page).await?;
    drop(slot);
    let options = renderer.options;
    let mut sink = Sink::new(page.codec, options.gzip_level)?;
    let mut xml = Vec::with_capacity(CHUNK_BYTES);
    let namespaces = Namespaces {
        news: true,
        ..Namespaces::default()
    };
    let mut writer =
        UrlsetWriter::start_with(&mut xml, options.max_urls, options.max_bytes, namespaces);
    let mut left_out = 0;
    for row in &rows {
        // The schema checked it; one that does not parse is left out
        // rather than served without its news.
        let Ok(news) = serde_json::from_str::<News>(&row.news) else {
            left_out += 1;
            continue;
        };
        let entry = UrlEntry {
            loc: &row.loc,
            lastmod: None,
            changefreq: None,
            priority: None,
            extensions: Extensions {
                news: Some(&news),
                ..Extensions::default()
            },
        };
        if let Some(reason) = writer.push(&mut xml, &entry)? {
            left_out += 1;
            renderer.skips.record(&page.site, row.id, &row.loc, reason);
        }
    }
    writer.finish(&mut xml);
    let mut chunks = vec![sink.write(&mut xml)?];
    chunks.push(sink.finish(&mut xml)?);
    chunks.retain(|chunk| !chunk.is_empty());
    let metrics = &renderer.metrics;
    metrics.page_built(started.elapsed(), rows.len() as u64, left_out);
    metrics.body_bytes(route, chunks.iter().map(Bytes::len).sum());
    Ok(chunks.into())
}

/// A stored JSON array, or nothing when there is none (or it does not
/// parse).
fn parsed<T: serde::de::DeserializeOwned>(json: Option<&str>) -> Vec<T> {
    json.and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}
