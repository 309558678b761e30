//! Moving a site to another cell while both serve (`sitemapd sites move`).
//!
//! 1. The target gets the site, refusing its writes, and a `COPY` of its
//!    rows; the source takes writes meanwhile.
//! 2. Rounds copy what changed on the source since the last round's
//!    snapshot (by `change_xid`) and delete what left it, until a round
//!    finds few changes.
//! 3. The switch: the source refuses the site's writes, waits for the
//!    transactions that began before, and a last round copies the rest.
//! 4. Both fold (they did before the switch too, so this places only the
//!    last round), and the site's rows are counted and summed on each,
//!    with the entries their pages serve and the rows left out: the move
//!    stops here, writes still refused, if they differ.
//! 5. The source marks the move verified (its writes stay refused, and
//!    `sites list --format nginx-map` leaves the site out); the target
//!    opens the site to writes, its IndexNow cursor at its feed's end.
//!
//! Until the proxy is switched the source serves the site, whole; after,
//! the target does, whole: at no moment do crawlers see a URL missing or
//! twice. Writes refused in between name the site and the other cell.

use std::time::{Duration, Instant};

use super::admin::{Admin, AdminError};
use super::{Site, SiteSpec};
use crate::store::moves::{self, Direction, OpenTransaction, ServedDigest};
use crate::store::{self, Store, Turn};

/// A round that copies at most this many rows is the last before the
/// switch: the switch's own round is then as short.
const SWITCH_AT_ROWS: u64 = 1_000;

/// Catch-up rounds before the switch whatever they find: writers faster
/// than the copy still get their writes refused for a bounded time.
const CATCH_UP_ROUNDS: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("no site {0:?} on the source")]
    NoSuchSite(String),
    #[error(
        "site {site:?} shares host {host} with {others}: the proxy routes a host to one cell, \
         so they cannot be apart"
    )]
    SharesHost {
        site: String,
        host: String,
        others: String,
    },
    #[error("site {site:?} is arriving on the source from {other}: finish that move first")]
    ArrivingHere { site: String, other: String },
    #[error("site {site:?} is moving to {other}, not to this target: --abort that move first")]
    MovingElsewhere { site: String, other: String },
    #[error("site {0:?} exists on the target: remove it there first (a move creates it)")]
    ExistsOnTarget(String),
    #[error("site {0:?} has moved and is verified: switch the proxy, then run with --finish")]
    AlreadyMoved(String),
    #[error("site {0:?} has no verified move to this target: run the move first")]
    NotVerified(String),
    #[error(
        "site {0:?}'s move is verified and the target takes its writes: aborting would lose \
         them; move it back instead"
    )]
    CannotAbort(String),
    #[error(
        "site {site:?}: after {waited_s} s these transactions on the source, begun before its \
         writes were refused, are still open (each may write the site): {open}. Its writes are \
         taken again; run the move again when they end"
    )]
    OpenTransactions {
        site: String,
        waited_s: u64,
        open: String,
    },
    #[error(
        "site {site:?}: the cells serve different entries (source {source_digest:?}, target \
         {target_digest:?}); its writes stay refused: run the move again, or --abort it"
    )]
    Mismatch {
        site: String,
        source_digest: ServedDigest,
        target_digest: ServedDigest,
    },
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    Store(#[from] store::Error),
}

/// A move between two cells' databases.
pub struct SiteMove<'a> {
    /// The source cell's site management.
    pub source: Admin<'a>,
    /// The target cell's.
    pub target: Admin<'a>,
    /// The target as the source's rows name it (its URL, no password).
    pub target_name: String,
    /// The source as the target's rows name it.
    pub source_name: String,
    /// How long the switch waits for transactions that began before it.
    pub switch_wait: Duration,
}

/// What a verified move did.
#[derive(Debug, Clone)]
pub struct Moved {
    pub site: Site,
    pub digest: ServedDigest,
    /// Catch-up rounds, the switch's included.
    pub rounds: usize,
    pub rows_copied: u64,
    pub took: Duration,
    /// From the refusal of the site's writes to the target's taking them.
    pub writes_refused_for: Duration,
}

impl SiteMove<'_> {
    fn source(&self) -> &Store {
        self.source.store
    }

    fn target(&self) -> &Store {
        self.target.store
    }

    /// Moves the site `name`, telling `progress` of each step.
    pub async fn run(
        &self,
        name: &str,
        mut progress: impl FnMut(String),
    ) -> Result<Moved, MoveError> {
        let started = Instant::now();
        let site = self.source.get(name).await.map_err(|error| match error {
            AdminError::NoSuchSite(name) => MoveError::NoSuchSite(name),
            error => error.into(),
        })?;
        let site = site.site;
        match self.source().site_move(name).await? {
            Some(m) if m.is(Direction::In) => {
                return Err(MoveError::ArrivingHere {
                    site: name.to_owned(),
                    other: m.other_cell,
                });
            }
            Some(m) if m.other_cell != self.target_name => {
                return Err(MoveError::MovingElsewhere {
                    site: name.to_owned(),
                    other: m.other_cell,
                });
            }
            Some(m) if m.verified_at.is_some() => {
                // Verified, but the target was not opened yet: open it.
                if self
                    .target()
                    .site_move(name)
                    .await?
                    .is_some_and(|m| m.is(Direction::In))
                {
                    self.target()
                        .open_arrived_site(name, site.indexnow_key.as_deref())
                        .await?;
                    let digest = self.target().served_digest(name).await?;
                    return Ok(Moved {
                        site,
                        digest,
                        rounds: 0,
                        rows_copied: 0,
                        took: started.elapsed(),
                        writes_refused_for: Duration::ZERO,
                    });
                }
                return Err(MoveError::AlreadyMoved(name.to_owned()));
            }
            _ => {}
        }
        let others: Vec<String> = self
            .source()
            .sites_on_host(site.host())
            .await?
            .into_iter()
            .filter(|other| other.name != name)
            .map(|other| other.name)
            .collect();
        if !others.is_empty() {
            return Err(MoveError::SharesHost {
                site: name.to_owned(),
                host: site.host().to_owned(),
                others: others.join(", "),
            });
        }
        self.prepare_target(&site).await?;
        self.source()
            .start_site_move(name, Direction::Out, &self.target_name)
            .await?;
        let cleared = self.target().delete_moved_rows(name).await?;
        if cleared > 0 {
            progress(format!(
                "deleted {cleared} rows an earlier try left on the target"
            ));
        }

        let mut tally = Tally::default();
        let mut round = self.round(name, None, &mut tally).await?;
        progress(format!(
            "copied {} rows (the site's {} at the copy's snapshot) in {:.1} s",
            round.copied,
            round.rows,
            started.elapsed().as_secs_f64()
        ));
        while tally.rounds < CATCH_UP_ROUNDS {
            let began = Instant::now();
            round = self.round(name, Some(&round.snapshot), &mut tally).await?;
            progress(format!(
                "caught up {} changed and {} deleted rows in {:.1} s",
                round.copied,
                round.deleted,
                began.elapsed().as_secs_f64()
            ));
            if round.copied + round.deleted <= SWITCH_AT_ROWS {
                break;
            }
        }

        // Placed before the switch, and caught up once more, so the switch
        // copies and places only what is written during the fold.
        let began = Instant::now();
        self.fold_both().await?;
        progress(format!(
            "both cells placed the rows in {:.1} s",
            began.elapsed().as_secs_f64()
        ));
        round = self.round(name, Some(&round.snapshot), &mut tally).await?;
        progress(format!(
            "caught up {} changed and {} deleted rows written meanwhile",
            round.copied, round.deleted
        ));

        let refused_at = Instant::now();
        self.switch_writes(name).await?;
        round = self.round(name, Some(&round.snapshot), &mut tally).await?;
        progress(format!(
            "writes refused on the source; copied the last {} changed and {} deleted rows \
             {:.1} s into the switch",
            round.copied,
            round.deleted,
            refused_at.elapsed().as_secs_f64()
        ));

        self.fold_both().await?;
        let (source_digest, target_digest) = tokio::join!(
            self.source().served_digest(name),
            self.target().served_digest(name)
        );
        let (source_digest, target_digest) = (source_digest?, target_digest?);
        if source_digest != target_digest {
            return Err(MoveError::Mismatch {
                site: name.to_owned(),
                source_digest,
                target_digest,
            });
        }
        progress(format!(
            "verified {:.1} s into the switch: both hold {} rows (checksum {}) and serve {} \
             entries, {} left out",
            refused_at.elapsed().as_secs_f64(),
            target_digest.rows,
            target_digest.checksum,
            target_digest.entries,
            target_digest.skipped
        ));
        self.source().mark_site_move_verified(name).await?;
        self.target()
            .open_arrived_site(name, site.indexnow_key.as_deref())
            .await?;
        Ok(Moved {
            site,
            digest: target_digest,
            rounds: tally.rounds,
            rows_copied: tally.rows_copied,
            took: started.elapsed(),
            writes_refused_for: refused_at.elapsed(),
        })
    }

    /// One round of the copy (see [`moves::copy_site_rows`]), counted.
    async fn round(
        &self,
        name: &str,
        after: Option<&str>,
        tally: &mut Tally,
    ) -> Result<moves::CopyRound, MoveError> {
        let round = moves::copy_site_rows(self.source(), self.target(), name, after).await?;
        tally.rounds += 1;
        tally.rows_copied += round.copied;
        Ok(round)
    }

    /// Both cells place what committed so far.
    async fn fold_both(&self) -> Result<(), MoveError> {
        let (source, target) = tokio::join!(
            self.source().fold(Turn::Wait),
            self.target().fold(Turn::Wait)
        );
        source?;
        target?;
        Ok(())
    }

    /// Creates the site on the target, refusing its writes, or finds it
    /// there from an earlier try.
    async fn prepare_target(&self, site: &Site) -> Result<(), MoveError> {
        let name = &site.name;
        match self.target().site_move(name).await? {
            Some(m) if m.is(Direction::In) => return Ok(()),
            // A finished move away from it: the site comes back.
            Some(m) if m.verified_at.is_some() && self.target().site(name).await?.is_none() => {
                self.target().end_site_move(name).await?;
            }
            Some(m) => {
                return Err(MoveError::MovingElsewhere {
                    site: name.clone(),
                    other: m.other_cell,
                });
            }
            None => {}
        }
        if self.target().site(name).await?.is_some() {
            return Err(MoveError::ExistsOnTarget(name.clone()));
        }
        // Refused before the site exists there, so no write slips in; its
        // key is set when it opens, with its cursor.
        self.target()
            .start_site_move(name, Direction::In, &self.source_name)
            .await?;
        let spec = SiteSpec {
            indexnow_key: None,
            ..SiteSpec::of(site)
        };
        if let Err(error) = self.target.add(name, &spec).await {
            self.target().end_site_move(name).await?;
            return Err(error.into());
        }
        Ok(())
    }

    /// Refuses the site's writes on the source and waits for the
    /// transactions that may have written it without seeing that; gives
    /// up, taking its writes again, after `switch_wait`.
    async fn switch_writes(&self, name: &str) -> Result<(), MoveError> {
        let since = self.source().refuse_site_writes(name).await?;
        let waiting = Instant::now();
        loop {
            let open = self.source().transactions_open_since_before(since).await?;
            if open.is_empty() {
                return Ok(());
            }
            if waiting.elapsed() >= self.switch_wait {
                self.source().take_site_writes(name).await?;
                return Err(MoveError::OpenTransactions {
                    site: name.to_owned(),
                    waited_s: self.switch_wait.as_secs(),
                    open: open.iter().map(describe).collect::<Vec<_>>().join("; "),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// After the proxy sends the site to the target: deletes it from the
    /// source, which goes on refusing its writes; returns the rows deleted.
    pub async fn finish(&self, name: &str) -> Result<u64, MoveError> {
        let verified = self
            .source()
            .site_move(name)
            .await?
            .is_some_and(|m| m.is(Direction::Out) && m.verified_at.is_some());
        let open_on_target = self.target().site(name).await?.is_some()
            && self.target().site_move(name).await?.is_none();
        if !verified || !open_on_target {
            return Err(MoveError::NotVerified(name.to_owned()));
        }
        self.source().stop_pushing_site(name).await?;
        let deleted = self.source().delete_moved_rows(name).await?;
        self.source.remove(name, false).await?;
        Ok(deleted)
    }

    /// Undoes a move not yet verified: the target forgets the site, and
    /// the source takes its writes again.
    pub async fn abort(&self, name: &str) -> Result<u64, MoveError> {
        if self
            .source()
            .site_move(name)
            .await?
            .is_some_and(|m| m.is(Direction::Out) && m.verified_at.is_some())
        {
            return Err(MoveError::CannotAbort(name.to_owned()));
        }
        let mut deleted = 0;
        if self
            .target()
            .site_move(name)
            .await?
            .is_some_and(|m| m.is(Direction::In))
        {
            deleted = self.target().delete_moved_rows(name).await?;
            if self.target().site(name).await?.is_some() {
                self.target.remove(name, false).await?;
            }
            self.target().end_site_move(name).await?;
        }
        self.source().end_site_move(name).await?;
        Ok(deleted)
    }
}

/// The rounds of a move so far, and the rows they copied.
#[derive(Debug, Default)]
struct Tally {
    rounds: usize,
    rows_copied: u64,
}

fn describe(open: &OpenTransaction) -> String {
    format!(
        "pid {} (xid {}, open since {}): {}",
        open.pid.map_or("?".to_owned(), |pid| pid.to_string()),
        open.xid,
        open.started
            .map_or("?".to_owned(), |started| started.to_string()),
        open.query.as_deref().unwrap_or("?")
    )
}
