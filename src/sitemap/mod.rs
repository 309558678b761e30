//! The sitemaps.org protocol as sitemapd emits it: limits, file names, and
//! the XML writer.
//!
//! Everything here is pure (rows in, bytes out), so it is tested on exact
//! bytes and against the protocol's XSDs without a database.

pub mod name;
pub mod writer;

pub use name::{Encoding, PageName};
pub use writer::{IndexWriter, LimitExceeded, SkipReason, UrlEntry, UrlsetWriter};

/// At most this many URLs in one sitemap (sitemaps.org, "Sitemap index files").
pub const PROTOCOL_MAX_URLS: u32 = 50_000;

/// At most this many bytes in one sitemap, uncompressed (sitemaps.org; gzip does not raise it).
pub const PROTOCOL_MAX_BYTES: u64 = 52_428_800;

/// At most this many sitemaps listed in one sitemap index (sitemaps.org).
pub const PROTOCOL_MAX_INDEX_ENTRIES: usize = 50_000;

/// Bytes of every page held back from the `<url>` entries for the XML
/// declaration, an optional stylesheet instruction, `<urlset …>` and its
/// closing tag. The schema's `sitemap_settings.entry_budget` is the page limit
/// minus this.
pub const DOCUMENT_RESERVE: u64 = 1024;

/// The smallest page byte limit that still fits the longest possible entry
/// (a 2,048-character loc of 4-byte characters, each percent-encoded to 12).
pub const MIN_MAX_BYTES: u64 = DOCUMENT_RESERVE + writer::MAX_ENTRY_BYTES as u64;
