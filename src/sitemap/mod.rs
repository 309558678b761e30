//! The sitemaps.org protocol as sitemapd emits it: limits, file names, and
//! the XML writer.
//!
//! Everything here is pure (rows in, bytes out), so it is tested on exact
//! bytes and against the protocol's XSDs without a database.

pub mod codes;
pub(crate) mod extensions;
pub mod name;
pub mod writer;

pub use extensions::Extensions;
pub(crate) use extensions::Namespaces;
pub use name::{Encoding, PageName};
pub use writer::{IndexWriter, LimitExceeded, SkipReason, UrlEntry, UrlsetWriter};

/// The seven `<changefreq>` values of the protocol (the schema's CHECK
/// repeats them; a test keeps the two equal).
pub const CHANGEFREQS: [&str; 7] = [
    "always", "hourly", "daily", "weekly", "monthly", "yearly", "never",
];

/// What a URL a sitemap names, or a site's base URL, must be: absolute
/// http(s), with a host, without credentials (crawlers refuse the rest).
/// The first rule `url` breaks, if any.
pub(crate) fn web_url_problem(url: &url::Url) -> Option<&'static str> {
    if !matches!(url.scheme(), "http" | "https") {
        Some("an http:// or https:// URL")
    } else if url.host_str().is_none_or(str::is_empty) {
        Some("a URL with a host")
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("a URL without credentials")
    } else {
        None
    }
}

/// At most this many URLs in one sitemap (sitemaps.org, "Sitemap index files").
pub const PROTOCOL_MAX_URLS: u32 = 50_000;

/// At most this many bytes in one sitemap, uncompressed (sitemaps.org; gzip does not raise it).
pub const PROTOCOL_MAX_BYTES: u64 = 52_428_800;

/// At most this many sitemaps listed in one sitemap index (sitemaps.org).
pub(crate) const PROTOCOL_MAX_INDEX_ENTRIES: usize = 50_000;

/// Bytes of every page held back from the `<url>` entries for the XML
/// declaration, an optional stylesheet instruction, `<urlset …>` and its
/// closing tag. The schema's `sitemap_settings.entry_budget` is the page limit
/// minus this.
pub const DOCUMENT_RESERVE: u64 = 1024;

/// The smallest page byte limit that still fits the longest possible entry
/// (a 2,048-character loc of 4-byte characters, each percent-encoded to 12).
pub const MIN_MAX_BYTES: u64 = DOCUMENT_RESERVE + writer::MAX_ENTRY_BYTES as u64;
