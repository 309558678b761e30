//! Ways records come in besides plain SQL, and the rules they all share.
//!
//! - [`validate`]: one rulebook for what a valid record is, and how it is
//!   normalised, whatever the record came through.
//! - [`formats`]: reading records from JSON Lines, CSV and sitemap files.
//! - [`import`]: `sitemapd import`, all or nothing, in bounded memory.

pub mod formats;
pub mod import;
pub mod validate;
