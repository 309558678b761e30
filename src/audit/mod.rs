//! The URL audit: the listed URLs of each site that turns `audit` on are
//! fetched from the live site (or through its `audit_origin`), first after
//! every change of their row and then every `audit_interval`, and what
//! each answers is kept in `sitemap_audits` ([`page`] judges it).
//!
//! One replica audits at a time (a session lock of the database), so a
//! site's `audit_requests_per_second` holds however many run. The auditor
//! has its own connections and HTTP client: serving never waits for it.
//! A request follows no redirect, reads at most 256 KiB of a body and
//! gives up after 10 s; it goes to the site's origin alone.

pub(crate) mod page;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::task::JoinSet;
use url::Url;

use crate::site::Site;
use crate::store::{AuditRecord, DueRow, Store};
use page::Checked;

/// Bytes of a body read, at most.
const MAX_BODY_BYTES: usize = 256 * 1024;
/// How long a request may take, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the auditor waits when no site has a URL due, or another
/// replica audits.
const IDLE: Duration = Duration::from_secs(5);
/// Requests in flight per site, at most.
const IN_FLIGHT: usize = 64;
/// Checks kept per statement.
const RECORD_BATCH: usize = 200;
/// How long a site that had nothing due waits for its next look: a look
/// walks its rows.
const SITE_IDLE: Duration = Duration::from_secs(60);

/// The auditor of every replica; one runs at a time.
#[derive(Clone)]
pub(crate) struct Auditor {
    /// A pool of its own.
    pub(crate) store: Store,
    /// Made when a site is first audited: loading the platform's roots
    /// is for services that audit.
    client: Arc<OnceLock<reqwest::Client>>,
    /// Per site: how far its pass over never-checked rows has gone, and
    /// when it may next be looked at.
    passes: Arc<Mutex<HashMap<String, Pass>>>,
}

#[derive(Debug, Clone, Copy)]
struct Pass {
    after: i64,
    next_look: tokio::time::Instant,
}

impl Auditor {
    pub(crate) fn new(store: Store) -> Auditor {
        Auditor {
            store,
            client: Arc::default(),
            passes: Arc::default(),
        }
    }

    /// Audits until the task is cancelled.
    pub(crate) async fn run(self) {
        loop {
            let turn = match self.store.take_audit_turn().await {
                Ok(Some(turn)) => turn,
                Ok(None) => {
                    tokio::time::sleep(IDLE).await;
                    continue;
                }
                Err(error) => {
                    tracing::warn!(%error, "audit: could not take the auditor's turn");
                    tokio::time::sleep(IDLE).await;
                    continue;
                }
            };
            // The turn lasts while its connection does.
            let mut turn = turn;
            loop {
                match self.round().await {
                    Ok(true) => {}
                    Ok(false) => tokio::time::sleep(IDLE).await,
                    Err(error) => {
                        tracing::warn!(%error, "audit: a round failed");
                        tokio::time::sleep(IDLE).await;
                    }
                }
                if sqlx::query("SELECT 1").execute(&mut turn).await.is_err() {
                    tracing::warn!("audit: lost the auditor's turn");
                    break;
                }
            }
        }
    }

    /// One round over every audited site, each at its own rate, at once;
    /// whether any checked a URL.
    async fn round(&self) -> Result<bool, crate::store::Error> {
        let sites = self.store.audited_sites().await?;
        let mut rounds = JoinSet::new();
        for site in sites {
            let auditor = self.clone();
            rounds.spawn(async move { auditor.site_round(site).await });
        }
        let mut checked_any = false;
        while let Some(done) = rounds.join_next().await {
            match done {
                Ok(Ok(checked)) => checked_any |= checked > 0,
                Ok(Err(error)) => tracing::warn!(%error, "audit: a site's round failed"),
                Err(error) => tracing::warn!(%error, "audit: a site's round panicked"),
            }
        }
        Ok(checked_any)
    }

    /// Checks the site's due URLs, at most half a minute's worth at its
    /// rate; how many.
    async fn site_round(&self, site: Site) -> Result<usize, crate::store::Error> {
        let rate = site.audit.requests_per_second;
        let limit = (rate * 30.0).clamp(10.0, 5000.0) as i32;
        let now = tokio::time::Instant::now();
        let pass = self.pass(&site.name, now);
        if pass.next_look > now {
            return Ok(0);
        }
        let due = self
            .store
            .audit_due(&site.name, site.audit.interval, limit, pass.after)
            .await?;
        // Where the pass goes on from; past its last row, it starts over
        // (to find rows changed behind it), after a rest if nothing was due.
        let walked = due.iter().filter(|row| row.in_pass).map(|row| row.id).max();
        self.set_pass(
            &site.name,
            Pass {
                after: walked.unwrap_or(0),
                next_look: if due.is_empty() { now + SITE_IDLE } else { now },
            },
        );
        if due.is_empty() {
            self.store.forget_gone_audits(&site.name).await?;
            return Ok(0);
        }
        let leaves_out = !site.audit.leave_out.is_empty();
        let site = Arc::new(site);
        let mut pace = Pace::new(rate);
        let mut fetches = JoinSet::new();
        let mut done = Vec::with_capacity(RECORD_BATCH);
        let total = due.len();
        for (n, row) in due.into_iter().enumerate() {
            while fetches.len() >= IN_FLIGHT {
                if let Some(Ok(record)) = fetches.join_next().await {
                    done.push(record);
                }
            }
            pace.next(n).await;
            let client = self.client.get_or_init(client).clone();
            let target = Arc::clone(&site);
            fetches.spawn(async move { check(&client, &target, row).await });
            while let Some(Ok(record)) = fetches.try_join_next() {
                done.push(record);
            }
            if done.len() >= RECORD_BATCH {
                self.store
                    .record_audits(&site.name, &done, leaves_out)
                    .await?;
                done.clear();
            }
        }
        while let Some(finished) = fetches.join_next().await {
            if let Ok(record) = finished {
                done.push(record);
            }
        }
        self.store
            .record_audits(&site.name, &done, leaves_out)
            .await?;
        Ok(total)
    }
}

impl Auditor {
    fn pass(&self, site: &str, now: tokio::time::Instant) -> Pass {
        let passes = self
            .passes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        passes.get(site).copied().unwrap_or(Pass {
            after: 0,
            next_look: now,
        })
    }

    fn set_pass(&self, site: &str, pass: Pass) {
        let mut passes = self
            .passes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        passes.insert(site.to_owned(), pass);
    }
}

/// When each request of a round may go: request n at n / rate seconds at
/// the earliest, spread evenly at rates above the timer's millisecond too,
/// and never more than the rate within any window (a second, or 1 / rate
/// below one a second), however a stall bunches the ones behind it.
struct Pace {
    started: tokio::time::Instant,
    rate: f64,
    window: Duration,
    most: usize,
    sent: std::collections::VecDeque<tokio::time::Instant>,
}

impl Pace {
    fn new(rate: f64) -> Pace {
        let window = Duration::from_secs_f64((1.0 / rate).max(1.0));
        let most = ((rate * window.as_secs_f64()).floor() as usize).max(1);
        Pace {
            started: tokio::time::Instant::now(),
            rate,
            window,
            most,
            sent: std::collections::VecDeque::with_capacity(most),
        }
    }

    /// Waits until request `n` may go, and counts it as sent.
    async fn next(&mut self, n: usize) {
        tokio::time::sleep_until(self.started + Duration::from_secs_f64(n as f64 / self.rate))
            .await;
        if self.sent.len() == self.most
            && let Some(&oldest) = self.sent.front()
        {
            tokio::time::sleep_until(oldest + self.window).await;
            self.sent.pop_front();
        }
        let now = tokio::time::Instant::now();
        while self.sent.front().is_some_and(|&at| at + self.window <= now) {
            self.sent.pop_front();
        }
        self.sent.push_back(now);
    }
}

/// The auditor's HTTP client: no redirect followed, a total time limit,
/// rustls with the platform's root certificates (Mozilla's where the
/// platform has none).
fn client() -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        tracing::warn!("audit: no platform root certificates found; using Mozilla's");
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    reqwest::Client::builder()
        .tls_backend_preconfigured(crate::announce::tls_config(roots))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(REQUEST_TIMEOUT)
        .build()
        .expect("a client with a preconfigured rustls backend builds")
}

/// The URL a request for `loc` goes to: the loc on the audit's origin. `None`
/// for a loc not on the site's origin, which is never fetched.
fn request_url(site: &Site, loc: &str) -> Option<Url> {
    let rest = loc.strip_prefix(&site.origin)?;
    if !(rest.is_empty() || rest.starts_with(['/', '?'])) {
        return None;
    }
    let origin = site.audit.origin.as_deref().unwrap_or(&site.origin);
    Url::parse(&format!("{origin}{rest}")).ok()
}

/// Fetches one URL and judges the answer.
async fn check(client: &reqwest::Client, site: &Site, row: DueRow) -> AuditRecord {
    let checked = match (Url::parse(&row.loc), request_url(site, &row.loc)) {
        (Ok(loc), Some(target)) => fetch(client, site, &loc, target).await,
        _ => Checked::failed(format!(
            "not fetched: outside the site's origin {}",
            site.origin
        )),
    };
    AuditRecord {
        id: row.id,
        loc: row.loc,
        row_updated_at: row.updated_at,
        status: checked.status.map(i32::from),
        location: checked.location,
        noindex: checked.noindex,
        canonical: checked.canonical,
        finding: checked.finding.as_str(),
        detail: checked.detail,
    }
}

async fn fetch(client: &reqwest::Client, site: &Site, loc: &Url, target: Url) -> Checked {
    let agent = site.audit.user_agent.clone().unwrap_or_else(|| {
        format!(
            "sitemapd-audit/{} (+{})",
            env!("CARGO_PKG_VERSION"),
            site.base_url
        )
    });
    let mut request = client
        .get(target)
        .header(reqwest::header::USER_AGENT, agent)
        .header(
            reqwest::header::ACCEPT,
            "text/html,application/xhtml+xml,*/*;q=0.5",
        );
    if site.audit.origin.is_some() {
        // Through another address, the site's own host still names it.
        request = request.header(reqwest::header::HOST, loc.host_str().unwrap_or_default());
    }
    let mut response = match request.send().await {
        Ok(response) => response,
        Err(error) => return Checked::failed(describe(&error)),
    };
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let mut body = Vec::new();
    while body.len() < MAX_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(error) if body.is_empty() => return Checked::failed(describe(&error)),
            // What arrived before a cut or the time limit is judged.
            Err(_) => break,
        }
    }
    body.truncate(MAX_BODY_BYTES);
    page::judge(loc, status, &headers, &body)
}

fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())
    } else if error.is_connect() {
        format!("could not connect: {error}")
    } else {
        format!("request failed: {error}")
    }
}
