//! `sitemapd token`: mints a write API token and the digest to configure.

use anyhow::Context;

pub(super) fn run() -> anyhow::Result<()> {
    let (token, hash) = sitemapd::tokens::mint().context("reading random bytes for the token")?;
    println!("token: {token}");
    println!("hash:  {hash}");
    eprintln!("Add the hash to api_token_hashes; send the token as Authorization: Bearer <token>.");
    Ok(())
}
