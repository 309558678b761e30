//! sitemapd: always-current XML sitemaps served from PostgreSQL.
//!
//! Applications write page records into the `sitemap_urls` table with plain
//! SQL, in transactions of their own that never wait for sitemapd. The
//! service folds what they commit into pages (each row on one page for good)
//! and a summary per page, a few times a second, and serves
//! `/sitemap_index.xml` and the `/sitemap-N.xml.gz` pages from those.
//!
//! # Layout: a folder per path
//!
//! Each path is one chain of folders, over the same store:
//!
//! - request: [`http`] → [`pages`] → [`store`]. `http` holds the
//!   connections and their limits, the routes, the write API under
//!   `/api/v1` and errors as responses; `pages` the page service below it
//!   (`summaries` in memory, the `cache` of built pages, `render` and its
//!   `codec`s, the `indexes`, the background `warmup`, the `skips` log).
//! - fold: `fold` (the loop, a few times a second) → `store::fold` (the
//!   fold's SQL, and the numbering of the rows it places) and
//!   `store::removals` (the removals it takes out of runs).
//! - ingest: the `import` command → [`ingest`] (readers, the validator every
//!   record goes through, the write API's too) → `store::import`.
//! - announce: [`announce`] (IndexNow pushes, index submissions) →
//!   `store::push`.
//! - audit: `audit` (fetching the audited sites' URLs from the live site,
//!   and judging what they answer) → `store::audits`.
//! - ledger: `crawlers` (each request's client, crawler family and whether
//!   it is verified; the writer of who fetched which file; the access log)
//!   → `store::crawlers`.
//!
//! Beside them: [`app`], the composition root that builds the service from
//! its [`config`] and starts and stops its background tasks; [`site`], the
//! sites as rows (their rules, the directory requests are routed by, their
//! management, shared by the API and `sitemapd sites`, the judge of their
//! locs against robots.txt that folds use through `store::robots`, and
//! their moves between cells over `store::moves`); `changes`,
//! which follows what the schema announces and drops what it makes stale;
//! [`sitemap`], the protocol itself, pure (limits, file names, URL rules,
//! the XML writer); [`clock`], [`tokens`], [`telemetry`], [`demo`], and the
//! private `metrics`, `quote` and `runtime`. The binary's commands are in
//! `src/cli/`. How pages are kept, the fold and the change feed are told in
//! `docs/architecture.md`; the schema is `schema.sql`.

pub(crate) mod announce;
pub mod app;
mod audit;
mod changes;
pub mod clock;
pub mod config;
mod crawlers;
pub mod demo;
mod epochs;
mod fold;
pub mod http;
pub mod ingest;
mod metrics;
pub mod pages;
mod quote;
mod runtime;
pub mod site;
pub mod sitemap;
pub mod store;
pub mod telemetry;
pub mod tokens;

pub use app::{App, apply_config};
