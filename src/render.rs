//! Renders one page from the store into its compressed chunks.
//!
//! A page is read, written as XML and compressed whole, into memory, before
//! any of it is sent: the database connection goes back to the pool as soon
//! as the rows are read, however slowly a client then takes the page, and a
//! database failure part-way is answered `503` rather than a sitemap cut
//! short. Every form of a page is served from these chunks (an uncompressed
//! `.xml` is inflated from its gzip as the client reads it).

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures_util::TryStreamExt;
use tokio::sync::OwnedSemaphorePermit;

use crate::metrics::Metrics;
use crate::sitemap::{LimitExceeded, UrlEntry, UrlsetWriter};
use crate::store::{Store, UrlRow};

/// XML gathered before it is compressed and sent as one chunk.
const CHUNK_BYTES: usize = 64 * 1024;

/// Skipped rows remembered so each is logged once; past this many, further
/// ones are still counted but logged again after a restart at most.
const SKIP_LOG_MEMORY: usize = 100_000;

/// Why a page could not be (completely) rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("reading the page's rows: {0}")]
    Database(#[from] crate::store::Error),
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    #[error("compressing the page: {0}")]
    Compress(#[from] std::io::Error),
}

/// How pages are rendered: the service's settings that shape a page.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    pub max_urls: u32,
    pub max_bytes: u64,
    pub gzip_level: u32,
    pub lastmod_fallback: bool,
}

/// Which page to render, and how to compress it.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub site: String,
    pub section: String,
    pub page: i32,
    pub codec: Codec,
    /// The route template, for the metrics.
    pub route: &'static str,
}

/// How a body is compressed: gzip for `.xml.gz` files, and any of these on
/// the wire for `.xml` documents, as the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    Identity,
    Gzip,
    Brotli,
    Zstd,
}

/// Brotli quality for wire compression: fast, yet smaller than gzip -6.
const BROTLI_QUALITY: u32 = 5;
const BROTLI_WINDOW_BITS: u32 = 22;
/// zstd's own default level.
const ZSTD_LEVEL: i32 = 3;

impl Codec {
    /// The `Content-Encoding` token (also used in ETags).
    pub fn token(self) -> &'static str {
        match self {
            Codec::Identity => "identity",
            Codec::Gzip => "gzip",
            Codec::Brotli => "br",
            Codec::Zstd => "zstd",
        }
    }
}

/// Compresses a whole document held in memory (the index).
pub fn compress(codec: Codec, gzip_level: u32, document: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut document = document;
    let mut sink = Sink::new(codec, gzip_level)?;
    let head = sink.write(&mut document)?;
    let tail = sink.finish(&mut document)?;
    Ok([head, tail].concat())
}

/// Rows the writer left out, logged once each.
#[derive(Debug, Default)]
pub struct SkipLog {
    seen: Mutex<HashSet<i64>>,
}

impl SkipLog {
    fn record(&self, site: &str, row: &UrlRow, reason: impl std::fmt::Display) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.len() < SKIP_LOG_MEMORY && seen.insert(row.id) {
            tracing::warn!(site, row_id = row.id, loc = %truncated(&row.loc, LOGGED_LOC_CHARS), %reason, "row left out of its sitemap");
        }
    }
}

/// What rendering a page needs besides the page itself.
#[derive(Debug, Clone)]
pub struct Renderer {
    pub store: Store,
    pub options: RenderOptions,
    pub skips: Arc<SkipLog>,
    pub metrics: Arc<Metrics>,
}

/// Renders a whole page into memory, for the page cache: its compressor's
/// chunks as they came. The build slot is held until the page is read and
/// written. A page is built whole before any byte of it is sent, so a
/// failure part-way is a clean `503`, never a cut-short sitemap.
pub async fn build_page(
    renderer: Renderer,
    request: PageRequest,
    slot: OwnedSemaphorePermit,
) -> Result<Arc<[Bytes]>, RenderError> {
    let Renderer {
        store,
        options,
        skips,
        metrics,
    } = renderer;
    let started = std::time::Instant::now();
    let (mut rows_read, mut left_out) = (0, 0);
    let mut chunks = Vec::new();
    let mut rows = std::pin::pin!(store.page_rows(&request.site, &request.section, request.page));
    let mut sink = Sink::new(request.codec, options.gzip_level)?;
    let mut xml = Vec::with_capacity(CHUNK_BYTES + crate::sitemap::writer::MAX_ENTRY_BYTES);
    let mut writer = UrlsetWriter::start(&mut xml, options.max_urls, options.max_bytes);
    while let Some(row) = rows.try_next().await? {
        let entry = UrlEntry {
            loc: &row.loc,
            lastmod: row
                .lastmod
                .or(options.lastmod_fallback.then_some(row.updated_at)),
            changefreq: row.changefreq.as_deref(),
            priority: row.priority,
        };
        rows_read += 1;
        if let Some(reason) = writer.push(&mut xml, &entry)? {
            left_out += 1;
            skips.record(&request.site, &row, reason);
        }
        if xml.len() >= CHUNK_BYTES {
            let chunk = sink.write(&mut xml)?;
            if !chunk.is_empty() {
                chunks.push(chunk);
            }
        }
    }
    drop(slot);
    writer.finish(&mut xml);
    chunks.push(sink.finish(&mut xml)?);
    metrics.page_built(started.elapsed(), rows_read, left_out);
    metrics.body_bytes(request.route, chunks.iter().map(Bytes::len).sum());
    Ok(chunks.into())
}

/// Where written XML goes: through a compressor, or straight out.
enum Sink {
    Identity,
    Gzip(Box<GzEncoder<Vec<u8>>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(Box<zstd::stream::write::Encoder<'static, Vec<u8>>>),
}

impl Sink {
    fn new(codec: Codec, gzip_level: u32) -> std::io::Result<Sink> {
        Ok(match codec {
            Codec::Identity => Sink::Identity,
            Codec::Gzip => Sink::Gzip(Box::new(GzEncoder::new(
                Vec::new(),
                Compression::new(gzip_level),
            ))),
            Codec::Brotli => Sink::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                CHUNK_BYTES,
                BROTLI_QUALITY,
                BROTLI_WINDOW_BITS,
            ))),
            Codec::Zstd => Sink::Zstd(Box::new(zstd::stream::write::Encoder::new(
                Vec::new(),
                ZSTD_LEVEL,
            )?)),
        })
    }

    /// Takes the XML gathered in `xml` (leaving it empty) and returns the
    /// bytes ready to send, which for a compressor may be none yet.
    fn write(&mut self, xml: &mut Vec<u8>) -> std::io::Result<Bytes> {
        let out = match self {
            Sink::Identity => {
                let capacity = xml.capacity();
                return Ok(Bytes::from(std::mem::replace(
                    xml,
                    Vec::with_capacity(capacity),
                )));
            }
            Sink::Gzip(encoder) => {
                encoder.write_all(xml)?;
                encoder.get_mut()
            }
            Sink::Brotli(encoder) => {
                encoder.write_all(xml)?;
                encoder.get_mut()
            }
            Sink::Zstd(encoder) => {
                encoder.write_all(xml)?;
                encoder.get_mut()
            }
        };
        xml.clear();
        Ok(Bytes::from(std::mem::take(out)))
    }

    /// Takes the last XML and ends the stream (the compressor's trailer).
    fn finish(self, xml: &mut Vec<u8>) -> std::io::Result<Bytes> {
        let out = match self {
            Sink::Identity => std::mem::take(xml),
            Sink::Gzip(mut encoder) => {
                encoder.write_all(xml)?;
                encoder.finish()?
            }
            Sink::Brotli(mut encoder) => {
                encoder.write_all(xml)?;
                encoder.flush()?;
                encoder.into_inner()
            }
            Sink::Zstd(mut encoder) => {
                encoder.write_all(xml)?;
                encoder.finish()?
            }
        };
        Ok(Bytes::from(out))
    }
}

/// A value cut for a log line or an error message: long enough to
/// recognise, never a flood.
pub fn truncated(value: &str, max_chars: usize) -> String {
    match value.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    }
}

/// How much of a loc log lines quote.
pub const LOGGED_LOC_CHARS: usize = 200;
