//! Who reads the sitemaps: each request's client (behind trusted proxies),
//! the crawler family its user agent names, whether the address is
//! verified as that family's (published ranges, optionally DNS), the
//! ledger of which crawler took which file, and the access log.
//!
//! The request path only looks things up in memory and hands records to
//! the ledger's and the access log's tasks over bounded channels.

mod access_log;
mod client;
mod dns;
mod family;
mod ledger;
mod ranges;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::header::USER_AGENT;
use tokio_util::sync::CancellationToken;

pub(crate) use access_log::{AccessLine, AccessLog};
pub(crate) use client::TrustedProxies;
pub(crate) use family::{Crawler, Family};
pub(crate) use ledger::{Fetch, LedgerSender};
pub(crate) use ranges::RangesError;
use ranges::{Ranges, Snapshot};

use crate::metrics::Metrics;
use crate::store::Store;

/// How often `crawler_ranges_dir` is looked at for changed files.
const RANGES_CHECK_EVERY: Duration = Duration::from_secs(5);

/// A request's client, as far as it is known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Visitor {
    pub(crate) address: IpAddr,
    /// The family its user agent names.
    pub(crate) family: Family,
    pub(crate) crawler: Crawler,
}

/// What the crawler settings configure.
#[derive(Debug, Clone, Default)]
pub(crate) struct CrawlerSettings {
    pub(crate) ranges_dir: Option<PathBuf>,
    pub(crate) verify_dns: bool,
    pub(crate) trusted_proxies: Vec<ipnet::IpNet>,
    pub(crate) ledger: bool,
    pub(crate) access_log: bool,
    pub(crate) access_log_file: Option<PathBuf>,
}

/// The crawler lookups and the ledger's and access log's senders.
#[derive(Debug)]
pub(crate) struct Crawlers {
    proxies: TrustedProxies,
    ranges: Arc<RwLock<Arc<Ranges>>>,
    dns: Option<dns::DnsVerifier>,
    pub(crate) ledger: Option<LedgerSender>,
    pub(crate) access_log: Option<AccessLog>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CrawlersError {
    #[error(transparent)]
    Ranges(#[from] RangesError),
    #[error("{0}")]
    AccessLog(std::io::Error),
}

impl Crawlers {
    /// Reads the ranges and starts the tasks the settings ask for, each
    /// until `stop`.
    pub(crate) fn start(
        settings: &CrawlerSettings,
        store: &Store,
        metrics: &Arc<Metrics>,
        stop: &CancellationToken,
    ) -> Result<(Crawlers, Vec<tokio::task::JoinHandle<()>>), CrawlersError> {
        let mut tasks = Vec::new();
        let ranges = Arc::new(RwLock::new(Arc::new(Ranges::default())));
        if let Some(dir) = &settings.ranges_dir {
            let (read, snapshot) = Ranges::read(dir)?;
            log_families(&read);
            *ranges.write().expect("ranges lock") = Arc::new(read);
            tasks.push(tokio::spawn(watch_ranges(
                dir.clone(),
                snapshot,
                ranges.clone(),
                stop.clone(),
            )));
        }
        let dns = settings.verify_dns.then(|| {
            let (verifier, task) = dns::DnsVerifier::start(stop.clone());
            tasks.push(task);
            verifier
        });
        let ledger = settings.ledger.then(|| {
            let (sender, task) = ledger::start(store.clone(), metrics.clone(), stop.clone());
            tasks.push(task);
            sender
        });
        let access_log = if settings.access_log {
            let (log, task) = AccessLog::start(
                settings.access_log_file.clone(),
                metrics.clone(),
                stop.clone(),
            )
            .map_err(CrawlersError::AccessLog)?;
            tasks.push(task);
            Some(log)
        } else {
            None
        };
        Ok((
            Crawlers {
                proxies: TrustedProxies::new(settings.trusted_proxies.clone()),
                ranges,
                dns,
                ledger,
                access_log,
            },
            tasks,
        ))
    }

    /// Who sent a request from `peer` with `headers`.
    pub(crate) fn identify(&self, peer: SocketAddr, headers: &HeaderMap) -> Visitor {
        let address = self.proxies.client(peer, headers);
        let user_agent = headers
            .get(USER_AGENT)
            .map_or(&b""[..], |value| value.as_bytes());
        let family = Family::of_user_agent(user_agent);
        let crawler = match family {
            Family::Other => Crawler::Other,
            family if self.verified(family, address) => Crawler::Verified(family),
            _ => Crawler::Unverified,
        };
        Visitor {
            address,
            family,
            crawler,
        }
    }

    fn verified(&self, family: Family, address: IpAddr) -> bool {
        let by_ranges = self
            .ranges
            .read()
            .expect("ranges lock")
            .verdict(family, address);
        by_ranges == Some(true)
            || self
                .dns
                .as_ref()
                .is_some_and(|dns| dns.verdict(address, family) == Some(true))
    }
}

fn log_families(ranges: &Ranges) {
    let families: Vec<&str> = ranges.families().map(Family::name).collect();
    tracing::info!(?families, "crawler ranges read");
}

/// Reads the directory again whenever its files change; a file that no
/// longer reads leaves the ranges as they were, and says why.
async fn watch_ranges(
    dir: PathBuf,
    mut seen: Snapshot,
    ranges: Arc<RwLock<Arc<Ranges>>>,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(RANGES_CHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stop.cancelled() => return,
        }
        let dir = dir.clone();
        let Ok(now) =
            tokio::task::spawn_blocking(move || ranges::snapshot(&dir).map(|s| (s, dir))).await
        else {
            return;
        };
        let (snapshot, dir_read) = match now {
            Ok(read) => read,
            Err(error) => {
                tracing::error!(%error, "crawler ranges not read again");
                continue;
            }
        };
        if snapshot == seen {
            continue;
        }
        let read = tokio::task::spawn_blocking(move || Ranges::read(&dir_read)).await;
        match read {
            Ok(Ok((read, snapshot))) => {
                log_families(&read);
                *ranges.write().expect("ranges lock") = Arc::new(read);
                seen = snapshot;
            }
            Ok(Err(error)) => {
                tracing::error!(%error, "crawler ranges kept as they were");
                seen = snapshot;
            }
            Err(_) => return,
        }
    }
}
