//! Ways records come in besides plain SQL, and the rules they all share.
//!
//! - [`validate`]: one rulebook for what a valid record is, and how it is
//!   normalised, whatever the record came through; [`extensions`] holds its
//!   rules for images, videos, news and hreflang alternates, and [`rule`]
//!   names every rule a refusal cites.
//! - [`formats`]: reading records from JSON Lines, CSV and sitemap files;
//!   [`sitemap_entry`] takes one `<url>` apart, extensions included.
//! - [`import`]: `sitemapd import`, all or nothing, in bounded memory; and
//!   the same atomic upsert for a write API batch.
//! - [`sort`]: rows in key order without duplicates, in bounded memory.
//! - [`batch`]: a write API request body taken apart into records.

pub(crate) mod batch;
pub(crate) mod extensions;
pub mod formats;
pub mod import;
pub mod rule;
pub(crate) mod sitemap_entry;
pub(crate) mod sort;
pub mod validate;
