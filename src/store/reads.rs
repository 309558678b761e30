//! Where the sitemaps' reads go: to the standby (`database_read_url`) while
//! it answers and keeps up, to the primary otherwise.
//!
//! A watcher asks the standby every [`CHECK_INTERVAL`] how far it has
//! replayed, against where the primary is. A standby that does not answer
//! within `db_acquire_timeout_ms`, or lags by more than `read_max_lag_ms`,
//! gets no reads until it answers and keeps up again; each change is logged
//! once, naming the standby, and counted. Reads begin on the primary, and
//! the standby's pool connects only when asked: a standby that is down at
//! the start costs the start nothing.
//!
//! A write through this process's API is read back from it at once: until
//! the watcher has seen the standby replay past the write's position in
//! the primary's WAL, reads go to the primary.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use sqlx::PgPool;

/// How often the watcher asks the standby.
const CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// The reads' servers.
#[derive(Debug, Clone)]
pub(crate) struct Reads {
    primary: PgPool,
    standby: Option<Arc<Standby>>,
}

#[derive(Debug)]
struct Standby {
    pool: PgPool,
    /// How logs name it: host, port and database, without a password.
    name: String,
    usable: AtomicBool,
    /// How far it has replayed the primary's WAL, as last seen (`u64::MAX`
    /// for a server not in recovery: nothing to wait for).
    replayed: AtomicU64,
    /// Where the primary's WAL was after this process's last write.
    written: AtomicU64,
}

/// Counted as reads move: `fallbacks` each time they leave the standby, and
/// which server they go to (1 for the one, 0 for the other).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadRouteMetrics {
    pub(crate) fallbacks: Counter,
    pub(crate) on_primary: Gauge,
    pub(crate) on_standby: Gauge,
}

/// How far a standby has replayed.
#[derive(Debug, sqlx::FromRow)]
struct Replay {
    in_recovery: bool,
    replayed: Option<String>,
    /// Past the primary's position when the look began.
    caught_up: Option<bool>,
    /// Since the last transaction it replayed committed.
    lag_seconds: Option<f64>,
}

/// What a look at the standby found.
#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Usable,
    Down(String),
    Lagging(Duration),
}

impl Reads {
    /// Every read on the primary.
    pub(crate) fn primary_only(primary: PgPool) -> Reads {
        Reads {
            primary,
            standby: None,
        }
    }

    /// Reads on `standby` (named `name` in logs) once the watcher finds it
    /// usable, on `primary` until then and whenever it is not.
    pub(crate) fn with_standby(primary: PgPool, standby: PgPool, name: String) -> Reads {
        Reads {
            primary,
            standby: Some(Arc::new(Standby {
                pool: standby,
                name,
                usable: AtomicBool::new(false),
                replayed: AtomicU64::new(0),
                written: AtomicU64::new(0),
            })),
        }
    }

    /// The pool the next read goes to, and whether it is the standby's.
    pub(crate) fn pool_for_read(&self) -> (&PgPool, bool) {
        match self.next_standby() {
            Some(standby) => (&standby.pool, true),
            None => (&self.primary, false),
        }
    }

    /// The primary's pool.
    pub(crate) fn primary(&self) -> &PgPool {
        &self.primary
    }

    /// The standby, when it is usable and has replayed this process's last
    /// write.
    fn next_standby(&self) -> Option<&Standby> {
        self.standby.as_deref().filter(|standby| {
            standby.usable.load(Ordering::Acquire)
                && standby.replayed.load(Ordering::Acquire)
                    >= standby.written.load(Ordering::Acquire)
        })
    }

    /// Notes where the primary's WAL is after a write of this process, so
    /// reads go to the primary until the standby has replayed past it.
    pub(crate) async fn note_write(&self) -> Result<(), sqlx::Error> {
        let Some(standby) = &self.standby else {
            return Ok(());
        };
        let at: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(&self.primary)
            .await?;
        standby
            .written
            .fetch_max(wal_position(&at).unwrap_or(u64::MAX), Ordering::AcqRel);
        Ok(())
    }

    /// Whether reads go to a standby now.
    pub(crate) fn on_standby(&self) -> bool {
        self.standby
            .as_ref()
            .is_some_and(|standby| standby.usable.load(Ordering::Acquire))
    }

    /// Whether there is a standby to watch.
    pub(crate) fn has_standby(&self) -> bool {
        self.standby.is_some()
    }

    /// Watches the standby until aborted: each look bounded by `timeout`,
    /// reads moved as it finds the standby usable or not.
    pub(crate) async fn watch(
        self,
        max_lag: Duration,
        timeout: Duration,
        metrics: ReadRouteMetrics,
    ) {
        let Some(standby) = self.standby.clone() else {
            return;
        };
        metrics.on_primary.set(1);
        metrics.on_standby.set(0);
        let mut last: Option<Verdict> = None;
        loop {
            let verdict = match tokio::time::timeout(timeout, self.look(&standby, max_lag)).await {
                Ok(verdict) => verdict,
                Err(_) => Verdict::Down(format!("no answer within {} ms", timeout.as_millis())),
            };
            let usable = verdict == Verdict::Usable;
            let was_usable = standby.usable.swap(usable, Ordering::AcqRel);
            if usable != was_usable || last.is_none() {
                match &verdict {
                    Verdict::Usable => tracing::info!(
                        standby = %standby.name,
                        "reads go to the standby"
                    ),
                    Verdict::Down(error) => tracing::warn!(
                        standby = %standby.name,
                        %error,
                        "the standby does not answer: reads go to the primary until it does"
                    ),
                    Verdict::Lagging(lag) => tracing::warn!(
                        standby = %standby.name,
                        lag_ms = lag.as_millis() as u64,
                        max_lag_ms = max_lag.as_millis() as u64,
                        "the standby lags: reads go to the primary until it keeps up"
                    ),
                }
                if was_usable && !usable {
                    metrics.fallbacks.inc();
                }
                metrics.on_standby.set(i64::from(usable));
                metrics.on_primary.set(i64::from(!usable));
            }
            last = Some(verdict);
            tokio::time::sleep(CHECK_INTERVAL).await;
        }
    }

    /// How far the standby has replayed against where the primary is. A
    /// read server not in recovery (a database of its own) is usable while
    /// it answers; so is a standby while the primary does not answer.
    async fn look(&self, standby: &Standby, max_lag: Duration) -> Verdict {
        let primary_at: Option<String> = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(&self.primary)
            .await
            .ok();
        let found: Result<Replay, sqlx::Error> = sqlx::query_as(
            "SELECT pg_is_in_recovery() AS in_recovery,
                    pg_last_wal_replay_lsn()::text AS replayed,
                    pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up,
                    extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8
                        AS lag_seconds",
        )
        .bind(primary_at.as_deref())
        .fetch_one(&standby.pool)
        .await;
        if let Ok(replay) = &found {
            let replayed = match &replay.replayed {
                Some(at) if replay.in_recovery => wal_position(at).unwrap_or(0),
                _ => u64::MAX,
            };
            standby.replayed.store(replayed, Ordering::Release);
        }
        match found {
            Err(error) => Verdict::Down(error.to_string()),
            Ok(replay) if !replay.in_recovery || replay.caught_up == Some(true) => Verdict::Usable,
            Ok(_) if primary_at.is_none() => Verdict::Usable,
            Ok(replay) => {
                let lag =
                    Duration::from_secs_f64(replay.lag_seconds.unwrap_or(f64::MAX).clamp(0.0, 1e9));
                if lag <= max_lag {
                    Verdict::Usable
                } else {
                    Verdict::Lagging(lag)
                }
            }
        }
    }
}

/// A WAL position (`pg_lsn` as text, `16/B374D848`) as a number.
fn wal_position(lsn: &str) -> Option<u64> {
    let (high, low) = lsn.split_once('/')?;
    Some((u64::from_str_radix(high, 16).ok()? << 32) | u64::from_str_radix(low, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_positions_order_as_the_server_orders_them() {
        assert_eq!(wal_position("0/0"), Some(0));
        assert_eq!(wal_position("16/B374D848"), Some(0x16_B374_D848));
        assert!(wal_position("1/0") > wal_position("0/FFFFFFFF"));
        assert_eq!(wal_position("nonsense"), None);
    }
}
