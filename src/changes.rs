//! Following what the schema announces, on connections of their own
//! outside the pool requests draw from: folds' page changes (channel
//! `sitemapd_pages`, naming the sites they changed) drop those sites'
//! summaries, and site and token changes (`sitemapd_sites`) drop what the
//! site directory holds of them, and a removed site's built pages.
//!
//! Anything may change while no one listens: a lost connection drops
//! everything, on reconnecting and until then. So that a listener that
//! hears nothing can tell a quiet database from a lost connection, every
//! replica sends a heartbeat on `sitemapd_pages` a few times per
//! `summary_max_age_ms`; the summaries are trusted only while something is
//! heard.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::pages::Pages;
use crate::pages::summaries::{self, HEARTBEAT};
use crate::site::{Directory, directory};
use crate::store::Store;

/// What the announcements are applied to.
#[derive(Debug, Clone)]
pub(crate) struct Followers {
    pub(crate) pages: Arc<Pages>,
    pub(crate) directory: Arc<Directory>,
}

/// Follows the announcements, and sends the heartbeat, until aborted,
/// reconnecting after a lost connection.
pub(crate) async fn follow(store: Store, followers: Followers) {
    // One connection to listen on, one to send the heartbeat on.
    let own = store.with_own_pool(2).pool().clone();
    let listening = async {
        loop {
            if let Err(error) = listen(&own, &followers).await {
                tracing::warn!(%error, "change listener lost");
            }
            forget_everything(&followers).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    tokio::join!(listening, heartbeat(&own, &followers));
}

async fn heartbeat(own: &PgPool, followers: &Followers) {
    let summaries = &followers.pages.summaries;
    if summaries.is_disabled() {
        return;
    }
    let mut ticker = tokio::time::interval(summaries.heartbeat_interval());
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let sent = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(summaries::CHANNEL)
            .bind(HEARTBEAT)
            .execute(own);
        if let Ok(Err(error)) = tokio::time::timeout(summaries.heartbeat_interval(), sent).await {
            tracing::debug!(%error, "could not send the change listener's heartbeat");
        }
    }
}

async fn forget_everything(followers: &Followers) {
    followers.pages.summaries.invalidate();
    followers.directory.forget_all();
}

/// Listens until the connection fails for good.
async fn listen(own: &PgPool, followers: &Followers) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(own).await?;
    listener
        .listen_all([summaries::CHANNEL, directory::CHANNEL])
        .await?;
    // Whatever changed before the listener started was not heard; from
    // now on it is, over a connection that just answered.
    forget_everything(followers).await;
    followers.pages.summaries.heard();
    loop {
        let Some(notice) = listener.try_recv().await? else {
            // Reconnected: what happened meanwhile was not heard.
            forget_everything(followers).await;
            followers.pages.summaries.heard();
            continue;
        };
        if notice.channel() == directory::CHANNEL {
            followers.pages.summaries.heard();
            let changed = followers.directory.forget(notice.payload()).await;
            for site in changed {
                site_changed(followers, &site).await;
            }
        } else {
            followers.pages.summaries.follow(notice.payload()).await;
        }
    }
}

/// A site created, changed or removed: its summaries go, and so do its
/// built pages once it is gone.
async fn site_changed(followers: &Followers, site: &str) {
    followers.pages.summaries.invalidate_site(site).await;
    if let Ok(None) = followers.directory.named(site).await {
        followers.pages.cache.forget_site(site);
    }
}
