//! Following what the schema announces, on a connection of its own outside
//! the pool requests draw from: folds' page changes (channel
//! `sitemapd_pages`) drop the page summaries, and site and token changes
//! (`sitemapd_sites`) drop what the site directory holds of them, and a
//! removed site's built pages.
//!
//! Anything may change while no one listens: a lost connection drops
//! everything, on reconnecting and until then.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};

use crate::pages::Pages;
use crate::pages::summaries;
use crate::site::{Directory, directory};
use crate::store::Store;

/// What the announcements are applied to.
#[derive(Debug, Clone)]
pub(crate) struct Followers {
    pub(crate) pages: Arc<Pages>,
    pub(crate) directory: Arc<Directory>,
}

/// Follows the announcements until aborted, reconnecting after a lost
/// connection.
pub(crate) async fn follow(store: Store, followers: Followers) {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(store.pool().connect_options().as_ref().clone());
    loop {
        if let Err(error) = listen(&own, &followers).await {
            tracing::warn!(%error, "change listener lost");
        }
        forget_everything(&followers).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
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
    // Whatever changed before the listener started was not heard.
    forget_everything(followers).await;
    loop {
        let Some(notice) = listener.try_recv().await? else {
            // Reconnected: what happened meanwhile was not heard.
            forget_everything(followers).await;
            continue;
        };
        if notice.channel() == directory::CHANNEL {
            let changed = followers.directory.forget(notice.payload()).await;
            for site in changed {
                site_changed(followers, &site).await;
            }
        } else {
            followers.pages.summaries.invalidate();
        }
    }
}

/// A site created, changed or removed: its summaries go, and so do its
/// built pages once it is gone.
pub(crate) async fn site_changed(followers: &Followers, site: &str) {
    followers.pages.summaries.invalidate();
    if let Ok(None) = followers.directory.named(site).await {
        followers.pages.cache.forget_site(site);
    }
}
