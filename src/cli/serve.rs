//! `sitemapd serve`.

use anyhow::Context;
use sitemapd::App;
use sitemapd::config::Config;
use sitemapd::store::Workload;
use tokio::net::TcpListener;

pub(super) async fn run(config: &Config) -> anyhow::Result<()> {
    let settings = &config.settings;
    sitemapd::http::raise_open_files_limit();
    // The ports are bound before anything else, so /healthz answers from the
    // first second; the database is reached, migrated and configured next,
    // and the backlog is placed while serving (/readyz says when).
    let metrics_listener = match settings.metrics_listen {
        Some(address) => Some(
            TcpListener::bind(address)
                .await
                .with_context(|| format!("listening on {address} (metrics_listen)"))?,
        ),
        None => None,
    };
    let listener = TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("listening on {}", settings.listen))?;
    let app = App::prepare(super::open(config, Workload::Serving).await?, config).await?;
    for site in &config.sites {
        tracing::info!(
            listen = %listener.local_addr()?,
            site = %site.name,
            index = %format!("{}sitemap_index.xml", site.base_url),
            "serving sitemaps"
        );
    }
    app.serve(listener, metrics_listener, shutdown_signal())
        .await?;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM (what container runtimes send).
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight responses");
}
