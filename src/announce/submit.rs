//! Submission by HTTP request: a GET of each `submit_urls` template, its
//! `{sitemap}` filled with the percent-encoded URL of a site's index, when
//! that index changed since the last submission the engine answered 200,
//! and at most once per `submit_interval_seconds` per template. Anything
//! but 200 is logged and tried again at the next interval.
//!
//! The index's version is its newest page lastmod, which moves on every
//! real change and never on a no-op, so an idle site is not submitted
//! again. Each round looks only at the sites whose pages changed since the
//! last (an index scan of the pages' change times), and those still
//! waiting for their interval or a retry; the first looks for the sites
//! changed since their last submission, in one query.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use time::OffsetDateTime;

use crate::config::SITEMAP_PLACEHOLDER;
use crate::metrics::Metrics;
use crate::pages::Indexes;
use crate::site::{Directory, Site};
use crate::store::{self, Store};

/// How often the indexes are looked at, at most and at least.
const TICK_MIN: Duration = Duration::from_millis(250);
const TICK_MAX: Duration = Duration::from_secs(30);

/// A site whose index is announced, and the sites its index lists.
#[derive(Debug, Clone)]
struct SiteIndex {
    site: Site,
    members: Vec<Site>,
}

#[derive(Debug, Clone)]
pub(crate) struct Submitter {
    pub(crate) store: Store,
    pub(crate) client: reqwest::Client,
    pub(crate) templates: Vec<String>,
    pub(crate) interval: Duration,
    /// What each index lists now.
    pub(crate) index_reader: Indexes,
    /// Which sites there are, and which index lists each.
    pub(crate) sites: Arc<Directory>,
    pub(crate) metrics: Arc<Metrics>,
}

/// Whether a round respects the interval and sends only changed indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    Due,
    /// `sitemapd submit`: every index, now.
    Now,
}

/// One GET made, and its answer (`None`: no answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Submitted {
    pub(crate) url: String,
    pub(crate) status: Option<u16>,
}

impl Submitter {
    /// Submits what is due until aborted.
    pub(crate) async fn run(self) {
        let tick = (self.interval / 4).clamp(TICK_MIN, TICK_MAX);
        let mut waiting: BTreeSet<String> = BTreeSet::new();
        let mut since: Option<OffsetDateTime> = None;
        loop {
            if let Err(error) = self.follow(&mut waiting, &mut since).await {
                tracing::warn!(%error, "sitemap submission: could not read or record the index's state");
            }
            tokio::time::sleep(tick).await;
        }
    }

    /// One round: the sites changed since the last (all not submitted since
    /// they changed, the first time) join those `waiting`, each is
    /// submitted when due, and those with nothing left to send leave.
    async fn follow(
        &self,
        waiting: &mut BTreeSet<String>,
        since: &mut Option<OffsetDateTime>,
    ) -> Result<(), Arc<store::Error>> {
        let newest = self.store.newest_page_change().await?;
        let changed = match *since {
            None => {
                self.store
                    .sites_changed_since_submitted(&self.templates)
                    .await?
            }
            Some(after) => self.store.sites_changed_after(after).await?,
        };
        waiting.extend(changed);
        *since = newest.max(*since).or(Some(OffsetDateTime::UNIX_EPOCH));
        let mut settled = Vec::new();
        for name in waiting.iter() {
            let mut left = false;
            for index in self.indexes_listing(name).await? {
                left |= self.submit(&index, When::Due, &mut Vec::new()).await?;
            }
            if !left {
                settled.push(name.clone());
            }
        }
        for name in settled {
            waiting.remove(&name);
        }
        Ok(())
    }

    /// The indexes that list the site `name`'s pages: its own, or those of
    /// the sites that hold it.
    async fn indexes_listing(&self, name: &str) -> Result<Vec<SiteIndex>, Arc<store::Error>> {
        let Some(site) = self.sites.named(name).await? else {
            return Ok(Vec::new());
        };
        let beside = self.sites.beside(&site).await?;
        let announcing: Vec<&Site> = if beside.is_held(&site) {
            beside
                .all()
                .iter()
                .map(AsRef::as_ref)
                .filter(|holder| holder.holds(&site) && !beside.is_held(holder))
                .collect()
        } else {
            vec![&site]
        };
        Ok(announcing
            .into_iter()
            .map(|announcing| SiteIndex {
                site: announcing.clone(),
                members: beside
                    .index_members(announcing)
                    .into_iter()
                    .cloned()
                    .collect(),
            })
            .collect())
    }

    /// Every announced index, for `sitemapd submit`.
    async fn every_index(&self) -> Result<Vec<SiteIndex>, Arc<store::Error>> {
        let mut indexes = Vec::new();
        for site in self.store.all_sites().await? {
            let beside = self.sites.beside(&site).await?;
            if !beside.is_held(&site) {
                let members = beside.index_members(&site).into_iter().cloned().collect();
                indexes.push(SiteIndex { site, members });
            }
        }
        Ok(indexes)
    }

    /// The GETs a round would make now, whatever their turn: for
    /// `submit --dry-run`.
    pub(crate) async fn planned(&self) -> Result<Vec<String>, Arc<store::Error>> {
        let mut planned = Vec::new();
        for index in self.every_index().await? {
            let (urls, _) = self.index_state(&index).await?;
            for template in &self.templates {
                planned.extend(urls.iter().map(|url| fill(template, url)));
            }
        }
        Ok(planned)
    }

    /// Sends every index to each template, now: `sitemapd submit`.
    pub(crate) async fn submit_all(&self) -> Result<Vec<Submitted>, Arc<store::Error>> {
        let mut submitted = Vec::new();
        for index in self.every_index().await? {
            self.submit(&index, When::Now, &mut submitted).await?;
        }
        Ok(submitted)
    }

    /// Sends `index` to each template when `when` says it is time; whether
    /// something is left to send later (its interval has not passed, or
    /// it was not received).
    async fn submit(
        &self,
        index: &SiteIndex,
        when: When,
        submitted: &mut Vec<Submitted>,
    ) -> Result<bool, Arc<store::Error>> {
        let (urls, version) = self.index_state(index).await?;
        let Some(version) = version else {
            return Ok(false);
        };
        let mut left = false;
        for template in &self.templates {
            let claim = self
                .store
                .claim_submission(&index.site.name, template, self.interval.as_secs_f64())
                .await?;
            let Some(claim) = claim else {
                // Another replica has the turn; look again next round.
                left = true;
                continue;
            };
            let changed = claim.submitted_version.is_none_or(|told| version > told);
            if when == When::Due && !(claim.interval_passed && changed) {
                left |= changed;
                continue;
            }
            let mut all_received = true;
            for url in &urls {
                let sent = self.get(&index.site.name, &fill(template, url)).await;
                all_received &= sent.status == Some(StatusCode::OK.as_u16());
                submitted.push(sent);
            }
            left |= !all_received;
            claim.record(all_received.then_some(version)).await?;
        }
        Ok(left)
    }

    /// The URLs of a site's index files, and its version (`None` while it
    /// lists no page).
    async fn index_state(
        &self,
        index: &SiteIndex,
    ) -> Result<(Vec<String>, Option<OffsetDateTime>), Arc<store::Error>> {
        let members: Vec<&Site> = index.members.iter().collect();
        let listing = self.index_reader.listing(&members).await?;
        let version = listing
            .listed()
            .next()
            .and_then(|_| listing.pages().map(|(_, entry)| entry.lastmod).max());
        let files = self.index_reader.announced(&members).await?;
        let urls = files
            .iter()
            .map(|file| {
                format!(
                    "{}{}",
                    index.site.base_url,
                    file.file_name(index.site.index_format.encoding())
                )
            })
            .collect();
        Ok((urls, version))
    }

    async fn get(&self, site: &str, url: &str) -> Submitted {
        let status = match self.client.get(url).send().await {
            Ok(response) if response.status() == StatusCode::OK => {
                tracing::info!(site, url, "sitemap submitted");
                Some(StatusCode::OK.as_u16())
            }
            Ok(response) => {
                let status = response.status().as_u16();
                let body = super::body_for_log(response).await;
                tracing::warn!(site, url, status, %body, "sitemap submission not received; trying again at the next interval");
                Some(status)
            }
            Err(error) => {
                tracing::warn!(site, url, %error, "sitemap submission got no answer; trying again at the next interval");
                None
            }
        };
        self.metrics.submission(site, status);
        Submitted {
            url: url.to_owned(),
            status,
        }
    }
}

/// `template` with its placeholder replaced by `index_url`, percent-encoded.
pub(crate) fn fill(template: &str, index_url: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(index_url.as_bytes()).collect();
    template.replace(SITEMAP_PLACEHOLDER, &encoded)
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn the_index_url_is_percent_encoded_into_the_template() {
        assert_eq!(
            fill(
                "https://engine.example/ping?sitemap={sitemap}",
                "https://www.example.com/shop/sitemap_index.xml"
            ),
            "https://engine.example/ping?sitemap=https%3A%2F%2Fwww.example.com%2Fshop%2Fsitemap_index.xml"
        );
    }
}
