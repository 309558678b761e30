//! Warm-up: after writes, pages that changed are rebuilt in the background,
//! so a crawler following the index rarely meets a cold page.
//!
//! Every interval the summaries (O(pages)) are compared with the newest
//! change seen before; changed pages are built into the page cache as
//! `.xml.gz`, newest first and a bounded number per round, one at a time,
//! through the same build slots as requests. The first round only takes
//! note of where things stand: warming a whole large site at start would
//! evict more than it keeps. While folds place a backlog in batches, rounds
//! wait: rebuilding the pages of every batch of a bulk load took CPU from
//! the load and its placement, and evicted pages for ones about to change.

use std::collections::HashMap;
use std::time::Duration;

use time::OffsetDateTime;

use std::sync::Arc;

use crate::metrics::routes;
use crate::pages::Pages;
use crate::pages::cache::PageKey;
use crate::pages::codec::Codec;
use crate::site::Site;

/// Pages rebuilt per round at most: enough for ordinary writes, bounded for
/// bulk ones (whose pages are then built on first request).
const PAGES_PER_ROUND: usize = 32;

/// Runs until aborted.
pub(crate) async fn run(pages: Arc<Pages>, sites: Vec<Site>, interval: Duration) {
    let mut seen: HashMap<String, OffsetDateTime> = HashMap::new();
    let mut first_round = true;
    loop {
        let mut read = Vec::with_capacity(sites.len());
        for site in &sites {
            match pages.renderer.store.index(&site.name).await {
                Ok(summaries) => read.push((site, summaries)),
                Err(error) => tracing::debug!(%error, "warm-up: summaries unavailable"),
            }
        }
        // Asked after the summaries were read: a fold commits its pages
        // and the fold state together, so summaries showing a batch of a
        // backlog are always followed by a state that shows the backlog.
        match pages.renderer.store.placing_a_backlog().await {
            Ok(false) => {}
            Ok(true) => {
                tokio::time::sleep(interval).await;
                continue;
            }
            Err(error) => tracing::debug!(%error, "warm-up: fold state unavailable"),
        }
        for (site, summaries) in read {
            let since = seen.get(&site.name).copied();
            if let Some(newest) = summaries.iter().map(|p| p.lastmod).max() {
                seen.insert(site.name.clone(), newest);
            }
            if first_round {
                continue;
            }
            let mut changed: Vec<_> = summaries
                .into_iter()
                .filter(|p| p.listed && since.is_none_or(|since| p.lastmod > since))
                .collect();
            changed.sort_by_key(|p| std::cmp::Reverse(p.lastmod));
            for page in changed.into_iter().take(PAGES_PER_ROUND) {
                let key = PageKey {
                    site: site.name.clone(),
                    section: page.section,
                    page: page.page,
                    codec: Codec::Gzip,
                    version: page.lastmod,
                };
                if let Err(error) = pages.cached(key, routes::PAGE_GZ).await {
                    tracing::debug!(%error, "warm-up: page not built");
                }
            }
        }
        first_round = false;
        tokio::time::sleep(interval).await;
    }
}
