//! Where telling search engines stands: each site's IndexNow cursor in the
//! change feed, and each site's index submissions.
//!
//! A replica sends only inside a [`Claim`]: a transaction holding the
//! site's cursor row (or submission row) locked, taken with `SKIP LOCKED`,
//! so replicas take turns without waiting and one that dies mid-request
//! releases its turn with its connection. What was accepted is recorded in
//! that same transaction, so a restart resumes right after it.

use sqlx::{Postgres, Transaction};
use time::OffsetDateTime;

use super::{Error, Store};

/// A site's changes not yet delivered to IndexNow.
#[derive(Debug, Clone, Copy, PartialEq, sqlx::FromRow)]
pub(crate) struct Backlog {
    /// Feed entries after the cursor.
    pub(crate) changes: i64,
    /// When the oldest of them was committed.
    pub(crate) oldest: Option<OffsetDateTime>,
}

/// The next batch of a site's changed URLs, in feed order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChangeBatch {
    /// Each URL once, where it first changed in the batch.
    pub(crate) urls: Vec<String>,
    /// The last feed entry the batch covers.
    pub(crate) through: i64,
    /// How many feed entries it covers (URLs that changed twice count twice).
    pub(crate) entries: usize,
}

/// A site's turn to send: its cursor row, locked until [`Claim::advance`]
/// commits or the claim is dropped (rolled back).
#[derive(Debug)]
pub(crate) struct Claim {
    tx: Transaction<'static, Postgres>,
    site: String,
    /// The last feed entry delivered so far.
    pub(crate) delivered_through: i64,
}

/// A site with a key that has feed entries after some position.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct KeyedChange {
    pub(crate) site: String,
    /// Whether it has a cursor yet.
    pub(crate) started: bool,
}

impl Store {
    /// Starts `site`'s IndexNow cursor at `at`, unless it has one.
    pub(crate) async fn start_indexnow(&self, site: &str, at: i64) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO sitemap_indexnow_cursors (site, delivered_through) VALUES ($1, $2)
             ON CONFLICT (site) DO NOTHING",
        )
        .bind(site)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Starts the cursor of every site with a key that has none at the
    /// feed's end: what changed before is never sent. One statement.
    pub(crate) async fn start_indexnow_cursors(&self) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO sitemap_indexnow_cursors (site, delivered_through)
             SELECT s.site, (SELECT coalesce(max(seq), 0) FROM sitemap_changes)
             FROM sitemap_sites s WHERE s.indexnow_key IS NOT NULL
             ON CONFLICT (site) DO NOTHING",
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every site with a key, by name.
    pub(crate) async fn keyed_sites(&self) -> Result<Vec<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT site FROM sitemap_sites WHERE indexnow_key IS NOT NULL ORDER BY site",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// The change feed's last entry (0 when empty).
    pub(crate) async fn feed_end(&self) -> Result<i64, Error> {
        Ok(
            sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM sitemap_changes")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Where the sites with a key and a cursor have delivered through, the
    /// least of them: where a look for their backlogs begins.
    pub(crate) async fn indexnow_delivered_through(&self) -> Result<Option<i64>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT min(k.delivered_through) FROM sitemap_indexnow_cursors k
             JOIN sitemap_sites s ON s.site = k.site AND s.indexnow_key IS NOT NULL",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// The sites with a key that have feed entries after `after` and up to
    /// `through`: one range of the feed, however many sites there are.
    pub(crate) async fn keyed_changes(
        &self,
        after: i64,
        through: i64,
    ) -> Result<Vec<KeyedChange>, Error> {
        Ok(sqlx::query_as(
            "SELECT c.site, bool_or(k.site IS NOT NULL) AS started
             FROM sitemap_changes c
             JOIN sitemap_sites s ON s.site = c.site AND s.indexnow_key IS NOT NULL
             LEFT JOIN sitemap_indexnow_cursors k ON k.site = c.site
             WHERE c.seq > $1 AND c.seq <= $2
             GROUP BY c.site ORDER BY c.site",
        )
        .bind(after)
        .bind(through)
        .fetch_all(&self.pool)
        .await?)
    }

    /// What `site` has waiting for IndexNow, counting at most `count_up_to`
    /// entries (`None`: all of them, which takes a while on a long backlog).
    pub(crate) async fn indexnow_backlog(
        &self,
        site: &str,
        count_up_to: Option<i64>,
    ) -> Result<Backlog, Error> {
        let backlog = sqlx::query_as(
            "SELECT (SELECT count(*) FROM (
                         SELECT 1 FROM sitemap_changes c
                         WHERE c.site = k.site AND c.seq > k.delivered_through
                         ORDER BY c.seq LIMIT $2) waiting) AS changes,
                    (SELECT c.committed_at FROM sitemap_changes c
                     WHERE c.site = k.site AND c.seq > k.delivered_through
                     ORDER BY c.seq LIMIT 1) AS oldest
             FROM sitemap_indexnow_cursors k WHERE k.site = $1",
        )
        .bind(site)
        .bind(count_up_to)
        .fetch_optional(&self.pool)
        .await?;
        Ok(backlog.unwrap_or(Backlog {
            changes: 0,
            oldest: None,
        }))
    }

    /// `site`'s turn to send, or `None` while another replica has it.
    pub(crate) async fn claim_indexnow(&self, site: &str) -> Result<Option<Claim>, Error> {
        let mut tx = self.pool.begin().await?;
        let delivered_through: Option<i64> = sqlx::query_scalar(
            "SELECT delivered_through FROM sitemap_indexnow_cursors
             WHERE site = $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(site)
        .fetch_optional(&mut *tx)
        .await?;
        Ok(delivered_through.map(|delivered_through| Claim {
            tx,
            site: site.to_owned(),
            delivered_through,
        }))
    }

    /// The batch `site` would send next, read without taking a turn (for
    /// `submit --dry-run`); `None` when it has no cursor yet.
    pub(crate) async fn peek_indexnow(
        &self,
        site: &str,
        max_urls: usize,
    ) -> Result<Option<ChangeBatch>, Error> {
        let mut conn = self.pool.acquire().await?;
        let cursor: Option<i64> = sqlx::query_scalar(
            "SELECT delivered_through FROM sitemap_indexnow_cursors WHERE site = $1",
        )
        .bind(site)
        .fetch_optional(&mut *conn)
        .await?;
        match cursor {
            Some(after) => Ok(Some(
                read_batch(&mut conn, site, after, None, max_urls).await?,
            )),
            None => Ok(None),
        }
    }
}

impl Claim {
    /// The changes after the cursor, up to `max_urls` feed entries and, when
    /// retrying a batch, no further than its `through`: the same batch again.
    pub(crate) async fn batch(
        &mut self,
        max_urls: usize,
        through: Option<i64>,
    ) -> Result<ChangeBatch, Error> {
        let (site, after) = (self.site.clone(), self.delivered_through);
        read_batch(&mut self.tx, &site, after, through, max_urls).await
    }

    /// Records everything through `through` as delivered, and ends the turn.
    pub(crate) async fn advance(mut self, through: i64) -> Result<(), Error> {
        sqlx::query(
            "UPDATE sitemap_indexnow_cursors SET delivered_through = $2, delivered_at = now()
             WHERE site = $1",
        )
        .bind(&self.site)
        .bind(through)
        .execute(&mut *self.tx)
        .await?;
        self.tx.commit().await?;
        Ok(())
    }
}

async fn read_batch(
    conn: &mut sqlx::PgConnection,
    site: &str,
    after: i64,
    through: Option<i64>,
    max_urls: usize,
) -> Result<ChangeBatch, Error> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT seq, loc FROM sitemap_changes
         WHERE site = $1 AND seq > $2 AND seq <= coalesce($3, 9223372036854775807)
         ORDER BY seq LIMIT $4",
    )
    .bind(site)
    .bind(after)
    .bind(through)
    .bind(i64::try_from(max_urls).unwrap_or(i64::MAX))
    .fetch_all(conn)
    .await?;
    let through = rows.last().map_or(after, |(seq, _)| *seq);
    let entries = rows.len();
    let mut seen = std::collections::HashSet::with_capacity(rows.len());
    let urls = rows
        .into_iter()
        .filter_map(|(_, loc)| seen.insert(loc.clone()).then_some(loc))
        .collect();
    Ok(ChangeBatch {
        urls,
        through,
        entries,
    })
}

/// A site's index submission to one URL template, while it is this
/// replica's turn.
#[derive(Debug)]
pub(crate) struct SubmissionClaim {
    tx: Transaction<'static, Postgres>,
    site: String,
    template: String,
    /// The index version the last successful submission told about.
    pub(crate) submitted_version: Option<OffsetDateTime>,
    /// Whether the last try was at least the interval ago (or never was).
    pub(crate) interval_passed: bool,
}

impl Store {
    /// The turn to submit `site`'s index to `template`, or `None` while
    /// another replica has it. `interval_seconds` decides
    /// [`SubmissionClaim::interval_passed`], by the database's clock.
    pub(crate) async fn claim_submission(
        &self,
        site: &str,
        template: &str,
        interval_seconds: f64,
    ) -> Result<Option<SubmissionClaim>, Error> {
        sqlx::query(
            "INSERT INTO sitemap_submissions (site, template) VALUES ($1, $2)
             ON CONFLICT (site, template) DO NOTHING",
        )
        .bind(site)
        .bind(template)
        .execute(&self.pool)
        .await?;
        let mut tx = self.pool.begin().await?;
        let row: Option<(Option<OffsetDateTime>, bool)> = sqlx::query_as(
            "SELECT submitted_version,
                    coalesce(attempted_at <= now() - make_interval(secs => $3), true)
             FROM sitemap_submissions
             WHERE site = $1 AND template = $2 FOR UPDATE SKIP LOCKED",
        )
        .bind(site)
        .bind(template)
        .bind(interval_seconds)
        .fetch_optional(&mut *tx)
        .await?;
        Ok(
            row.map(|(submitted_version, interval_passed)| SubmissionClaim {
                tx,
                site: site.to_owned(),
                template: template.to_owned(),
                submitted_version,
                interval_passed,
            }),
        )
    }
}

impl SubmissionClaim {
    /// Records a try, and the version it told about when it succeeded.
    pub(crate) async fn record(mut self, told: Option<OffsetDateTime>) -> Result<(), Error> {
        sqlx::query(
            "UPDATE sitemap_submissions
             SET attempted_at = now(), submitted_version = coalesce($3, submitted_version)
             WHERE site = $1 AND template = $2",
        )
        .bind(&self.site)
        .bind(&self.template)
        .bind(told)
        .execute(&mut *self.tx)
        .await?;
        self.tx.commit().await?;
        Ok(())
    }
}
