//! The crawler ledger as operators read it: each row beside the version of
//! its file that is served now, so that whether a crawler holds the
//! current one is known (the API, the HTML view and the metrics).

use std::collections::HashMap;

use time::OffsetDateTime;

use super::{HttpError, HttpState, sitemaps};
use crate::metrics::CrawlerHeld;
use crate::store::LedgerRow;

/// A ledger row and the version of its file served now.
#[derive(Debug, Clone)]
pub(crate) struct Holding {
    pub(crate) row: LedgerRow,
    /// `None`: the file is not served now (gone, or never was).
    pub(crate) current_version: Option<OffsetDateTime>,
}

impl Holding {
    /// Whether the crawler's last fetch served the version served now.
    pub(crate) fn holds_current(&self) -> bool {
        self.row.served_version.is_some() && self.row.served_version == self.current_version
    }
}

/// The ledger of one site, or of all, with each file's current version.
pub(crate) async fn holdings(
    state: &HttpState,
    site: Option<&str>,
) -> Result<Vec<Holding>, HttpError> {
    let rows = state.store.crawler_ledger(site).await?;
    let mut current: HashMap<(String, String), Option<OffsetDateTime>> = HashMap::new();
    let mut holdings = Vec::with_capacity(rows.len());
    for row in rows {
        let key = (row.site.clone(), row.file.clone());
        let current_version = match current.get(&key) {
            Some(version) => *version,
            None => {
                let version = match state.sites.named(&row.site).await? {
                    Some(site) => sitemaps::current_version(state, &site, &row.file).await?,
                    None => None,
                };
                current.insert(key, version);
                version
            }
        };
        holdings.push(Holding {
            row,
            current_version,
        });
    }
    Ok(holdings)
}

/// Per site and verified crawler: its last fetch, and the age in seconds
/// at `now` of the oldest version it last took of a file since replaced
/// (0: none).
pub(crate) fn verified_crawlers(holdings: &[Holding], now: OffsetDateTime) -> Vec<CrawlerHeld> {
    let mut held: HashMap<(String, &'static str), CrawlerHeld> = HashMap::new();
    for holding in holdings.iter().filter(|h| h.row.verified) {
        let Some(crawler) = crate::crawlers::Family::named(&holding.row.crawler) else {
            continue;
        };
        let entry = held
            .entry((holding.row.site.clone(), crawler.name()))
            .or_insert_with(|| CrawlerHeld {
                site: holding.row.site.clone(),
                crawler: crawler.name(),
                last_fetch: holding.row.last_fetch,
                stale_version_age: 0,
            });
        entry.last_fetch = entry.last_fetch.max(holding.row.last_fetch);
        if let (Some(served), Some(_)) = (holding.row.served_version, holding.current_version)
            && !holding.holds_current()
        {
            let age = (now - served).whole_seconds().max(0);
            entry.stale_version_age = entry.stale_version_age.max(age);
        }
    }
    held.into_values().collect()
}
