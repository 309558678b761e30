//! `sitemapd token`: mints a write API token. An operator's prints the
//! digest to configure; a site's (`--site NAME`) is stored with the site.

use anyhow::Context;
use sitemapd::config::Config;
use sitemapd::site::admin::Admin;
use sitemapd::store::Workload;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Mint a token of this site, which may read and write only its URLs
    /// and read its stats; its digest is stored with the site.
    #[arg(long)]
    site: Option<String>,
}

pub(super) async fn run(config: &Config, args: Args) -> anyhow::Result<()> {
    let Some(site) = args.site else {
        let (token, hash) =
            sitemapd::tokens::mint().context("reading random bytes for the token")?;
        println!("token: {token}");
        println!("hash:  {hash}");
        eprintln!(
            "Add the hash to api_token_hashes; send the token as Authorization: Bearer <token>."
        );
        return Ok(());
    };
    let store = super::connect(config, Workload::Serving).await?;
    let admin = Admin {
        store: &store,
        defaults: config.site_defaults(),
        proxy_strips_prefix: config.settings.proxy_strips_prefix,
    };
    let (token, digest) = admin.mint_token(&site).await?;
    println!("token: {token}");
    println!("hash:  {digest}");
    eprintln!(
        "Stored with site {site}: send the token as Authorization: Bearer <token>. \
         Revoke it with DELETE /api/v1/sites/{site}/tokens/{digest}."
    );
    Ok(())
}
