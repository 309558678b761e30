//! `sitemapd demo`: synthetic rows under a configured site.

use anyhow::Context;
use sitemapd::config::Config;
use sitemapd::site::admin::Admin;
use sitemapd::sitemap::name::parse_slug;
use sitemapd::store::Workload;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// How many URLs to add.
    #[arg(long)]
    urls: u64,
    /// Which site (default: the primary one).
    #[arg(long)]
    site: Option<String>,
    /// Sections to spread them over, comma-separated (default section if none).
    #[arg(long, value_delimiter = ',', value_parser = parse_slug)]
    sections: Vec<String>,
}

pub(super) async fn run(config: &Config, args: Args) -> anyhow::Result<()> {
    let store = super::connect(config, Workload::Bulk).await?;
    let name = args.site.as_deref().unwrap_or(&config.primary_site().name);
    let admin = Admin {
        store: &store,
        defaults: config.site_defaults(),
        proxy_strips_prefix: config.settings.proxy_strips_prefix,
    };
    let site = admin
        .get(name)
        .await
        .with_context(|| format!("--site {name} (`sitemapd sites list` lists them)"))?
        .site;
    let seeded = sitemapd::demo::seed(
        &store,
        &site,
        &args.sections,
        args.urls,
        super::progress::rows(args.urls),
    )
    .await?;
    let per_second = seeded.rows as f64 / seeded.elapsed.as_secs_f64().max(1e-9);
    tracing::info!(
        rows = seeded.rows,
        elapsed_ms = seeded.elapsed.as_millis() as u64,
        rows_per_second = per_second.round() as u64,
        "demo data ready"
    );
    Ok(())
}
