//! Whose turn it is to fold: one replica at a time, across any number.
//!
//! A turn is a session-level advisory lock, taken before the turn's
//! transaction begins. A replica whose turn it is not hears `false` from
//! `pg_try_advisory_lock`: no statement fails, so PostgreSQL's log stays
//! free of errors however often replicas try (a `LOCK … NOWAIT` that failed
//! logged an ERROR each time, about 3 a second with two replicas). The
//! turn's transaction then locks `sitemap_fold_state` as its first
//! statement, as the schema's functions require, which waits only for a
//! configuration change (or a replica of a build before turns).
//!
//! A session lock outlives a transaction, so a turn is held by its
//! connection: released when it ends, and when it does not end (an error,
//! or the task dropped midway), its connection is closed rather than put
//! back in the pool, and the lock goes with it.

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use super::Error;
use super::fold::Turn;

/// The lock's two keys: sitemapd's, then the turn's (the two-key space,
/// apart from the one-key locks the sites' writes take).
macro_rules! turn_lock {
    ($function:literal) => {
        concat!(
            "SELECT ",
            $function,
            "(hashtext('sitemapd'), hashtext('fold turn'))"
        )
    };
}

pub(super) struct HeldTurn {
    conn: PoolConnection<Postgres>,
    released: bool,
}

impl HeldTurn {
    /// Takes the turn on a connection of `pool`: waits for it with
    /// [`Turn::Wait`] (a minute at most: longer is a stuck session,
    /// reported as such), `None` with [`Turn::Skip`] when it is taken.
    pub(super) async fn take(pool: &PgPool, turn: Turn) -> Result<Option<HeldTurn>, Error> {
        let mut conn = pool.acquire().await?;
        let taken = match turn {
            Turn::Skip => {
                sqlx::query_scalar(turn_lock!("pg_try_advisory_lock"))
                    .fetch_one(&mut *conn)
                    .await?
            }
            Turn::Wait => {
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                sqlx::query("SET LOCAL lock_timeout = '60s'")
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(turn_lock!("pg_advisory_lock"))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                true
            }
        };
        Ok(taken.then_some(HeldTurn {
            conn,
            released: false,
        }))
    }

    /// Begins the turn's transaction, `sitemap_fold_state` locked first;
    /// REPEATABLE READ for a fold.
    pub(super) async fn begin(
        &mut self,
        repeatable_read: bool,
    ) -> Result<Transaction<'_, Postgres>, Error> {
        let mut tx = sqlx::Connection::begin(&mut *self.conn).await?;
        if repeatable_read {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .execute(&mut *tx)
                .await?;
        }
        lock_fold_state(&mut tx).await?;
        Ok(tx)
    }

    /// The turn's connection, outside its transaction: for what may not
    /// run in one (a `VACUUM`).
    pub(super) fn connection(&mut self) -> &mut PgConnection {
        &mut self.conn
    }

    /// Ends the turn; the connection goes back to the pool.
    pub(super) async fn release(mut self) -> Result<(), Error> {
        sqlx::query(turn_lock!("pg_advisory_unlock"))
            .execute(&mut *self.conn)
            .await?;
        self.released = true;
        Ok(())
    }
}

impl Drop for HeldTurn {
    fn drop(&mut self) {
        if !self.released {
            self.conn.close_on_drop();
        }
    }
}

/// Locks `sitemap_fold_state` for this transaction, before any query takes
/// its snapshot, waiting for whoever holds it (a minute at most).
pub(super) async fn lock_fold_state(tx: &mut Transaction<'_, Postgres>) -> Result<(), Error> {
    sqlx::query("SET LOCAL lock_timeout = '60s'")
        .execute(&mut **tx)
        .await?;
    sqlx::query("LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE")
        .execute(&mut **tx)
        .await?;
    Ok(())
}
