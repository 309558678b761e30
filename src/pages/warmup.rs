//! Warm-up: after writes, pages that changed are rebuilt in the background,
//! so a crawler following the index rarely meets a cold page.
//!
//! Every interval the pages changed since the last look are asked for,
//! newest first and a bounded number per round, wherever they are: an
//! index scan of the summaries' change times, so the round's cost follows
//! what changed, not how many sites exist. They are built into the page
//! cache as `.xml.gz`, one at a time, through the same build slots as
//! requests. The first round only takes note of where things stand:
//! warming a whole large site at start would evict more than it keeps.
//! While folds place a backlog in batches, rounds wait, and a backlog that
//! starts during a round stops it: rebuilding the pages of every batch of
//! a bulk load took CPU from the load and its placement, and evicted pages
//! for ones about to change.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use crate::metrics::routes;
use crate::pages::Pages;
use crate::pages::cache::PageKey;
use crate::pages::codec::Codec;
use crate::store::ChangedPage;

/// Pages rebuilt per round at most: enough for ordinary writes, bounded for
/// bulk ones (whose pages are then built on first request).
const PAGES_PER_ROUND: i64 = 32;

/// Runs until aborted.
pub(crate) async fn run(pages: Arc<Pages>, interval: Duration) {
    let store = &pages.renderer.store;
    let mut since: Option<OffsetDateTime> = None;
    loop {
        let newest = match store.newest_page_change().await {
            Ok(newest) => newest,
            Err(error) => {
                tracing::debug!(%error, "warm-up: summaries unavailable");
                tokio::time::sleep(interval).await;
                continue;
            }
        };
        let Some(after) = since else {
            since = Some(newest.unwrap_or(OffsetDateTime::UNIX_EPOCH));
            tokio::time::sleep(interval).await;
            continue;
        };
        let changed = match store.pages_changed_after(after, PAGES_PER_ROUND).await {
            Ok(changed) => changed,
            Err(error) => {
                tracing::debug!(%error, "warm-up: summaries unavailable");
                tokio::time::sleep(interval).await;
                continue;
            }
        };
        if warm(&pages, changed).await {
            since = newest.max(Some(after));
        }
        tokio::time::sleep(interval).await;
    }
}

/// Builds each page in turn unless folds are placing a backlog; whether
/// the round went through every page (else it is left to a later one,
/// which finds the same pages again, those built already in the cache).
///
/// Asked before each page, after the pages were read: a fold commits its
/// pages and the fold state together, so pages showing a batch of a
/// backlog are always followed by a state that shows the backlog, and a
/// backlog that starts during a round stops it at the next page.
async fn warm(pages: &Pages, changed: Vec<ChangedPage>) -> bool {
    for page in changed {
        match pages.renderer.store.placing_a_backlog().await {
            Ok(false) => {}
            Ok(true) => return false,
            Err(error) => tracing::debug!(%error, "warm-up: fold state unavailable"),
        }
        let key = PageKey {
            site: page.site,
            section: page.section,
            page: page.page,
            codec: Codec::Gzip,
            version: page.lastmod,
        };
        if let Err(error) = pages.cached(key, routes::PAGE_GZ).await {
            tracing::debug!(%error, "warm-up: page not built");
        }
    }
    true
}
