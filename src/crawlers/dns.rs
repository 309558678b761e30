//! Verifying a crawler by DNS, as the engines document it: the address's
//! reverse name must be under the family's domains, and that name must
//! resolve back to the address. Lookups run on a task of their own, never
//! on the request path; their answers are cached.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::family::Family;

/// How long an answer holds, and how long a lookup may take.
const ANSWER_LIFETIME: Duration = Duration::from_secs(24 * 3600);
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Addresses remembered at most, and lookups waiting at most: a flood of
/// made-up crawlers from many addresses costs this much and no more.
const CACHED_ADDRESSES: u64 = 65_536;
const WAITING_LOOKUPS: usize = 1024;
const LOOKUPS_AT_ONCE: usize = 8;

#[derive(Debug, Clone)]
pub(crate) struct DnsVerifier {
    answers: Cache<(IpAddr, Family), bool>,
    lookups: mpsc::Sender<(IpAddr, Family)>,
}

impl DnsVerifier {
    /// The verifier and the task that does its lookups until `stop`.
    pub(crate) fn start(stop: CancellationToken) -> (DnsVerifier, tokio::task::JoinHandle<()>) {
        let answers = Cache::builder()
            .max_capacity(CACHED_ADDRESSES)
            .time_to_live(ANSWER_LIFETIME)
            .build();
        let (lookups, waiting) = mpsc::channel(WAITING_LOOKUPS);
        let task = tokio::spawn(look_up(waiting, answers.clone(), stop));
        (DnsVerifier { answers, lookups }, task)
    }

    /// Whether DNS verified `address` as `family`'s, if known; if not, a
    /// lookup is queued, and a later request from it has the answer.
    pub(crate) fn verdict(&self, address: IpAddr, family: Family) -> Option<bool> {
        let known = self.answers.get(&(address, family));
        if known.is_none() {
            let _ = self.lookups.try_send((address, family));
        }
        known
    }
}

async fn look_up(
    mut waiting: mpsc::Receiver<(IpAddr, Family)>,
    answers: Cache<(IpAddr, Family), bool>,
    stop: CancellationToken,
) {
    let at_once = Arc::new(Semaphore::new(LOOKUPS_AT_ONCE));
    loop {
        let key = tokio::select! {
            key = waiting.recv() => match key { Some(key) => key, None => return },
            () = stop.cancelled() => return,
        };
        if answers.contains_key(&key) {
            continue;
        }
        let Ok(permit) = at_once.clone().acquire_owned().await else {
            return;
        };
        let answers = answers.clone();
        tokio::spawn(async move {
            let (address, family) = key;
            let lookup = tokio::task::spawn_blocking(move || verified_by_dns(address, family));
            let verified = match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
                Ok(Ok(verified)) => verified,
                _ => false,
            };
            tracing::debug!(%address, family = family.name(), verified, "crawler address looked up");
            answers.insert(key, verified);
            drop(permit);
        });
    }
}

/// Reverse, then forward: the system resolver's answers.
fn verified_by_dns(address: IpAddr, family: Family) -> bool {
    let Ok(name) = dns_lookup::lookup_addr(&address) else {
        return false;
    };
    if !name_is_familys(&name, family) {
        return false;
    }
    dns_lookup::lookup_host(&name).is_ok_and(|addresses| {
        addresses
            .into_iter()
            .any(|resolved| resolved.to_canonical() == address.to_canonical())
    })
}

/// Whether a host name is one of the family's domains or under one.
fn name_is_familys(name: &str, family: Family) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    family.dns_domains().iter().any(|domain| {
        name.strip_suffix(domain)
            .is_some_and(|head| head.is_empty() || head.ends_with('.'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_under_the_familys_domains_only() {
        assert!(name_is_familys(
            "crawl-66-249-66-1.googlebot.com",
            Family::Googlebot
        ));
        assert!(name_is_familys(
            "rate-limited-proxy-66-249-90-77.google.com.",
            Family::Googlebot
        ));
        assert!(name_is_familys(
            "msnbot-157-55-39-1.search.msn.com",
            Family::Bingbot
        ));
        assert!(!name_is_familys(
            "crawl-66-249-66-1.googlebot.com.evil.example",
            Family::Googlebot
        ));
        assert!(!name_is_familys("notgooglebot.com", Family::Googlebot));
        assert!(!name_is_familys("crawl-1.googlebot.com", Family::Bingbot));
        assert!(!name_is_familys("localhost", Family::Googlebot));
    }

    #[tokio::test]
    async fn loopback_is_no_crawler_and_the_answer_is_cached() {
        let stop = CancellationToken::new();
        let (verifier, task) = DnsVerifier::start(stop.clone());
        let address: IpAddr = "127.0.0.1".parse().expect("test input");
        assert_eq!(verifier.verdict(address, Family::Googlebot), None);
        let mut answer = None;
        for _ in 0..100 {
            answer = verifier.answers.get(&(address, Family::Googlebot));
            if answer.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(answer, Some(false));
        assert_eq!(verifier.verdict(address, Family::Googlebot), Some(false));
        stop.cancel();
        task.await.expect("test input");
    }
}
