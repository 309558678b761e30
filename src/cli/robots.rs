//! `sitemapd robots`: the `Sitemap:` lines for robots.txt. Sites with more
//! pages than an index file lists have several index files: the database
//! says how many there are now.

use sitemapd::config::Config;

pub(super) async fn run(config: &Config) -> anyhow::Result<()> {
    let store = super::connect_placed(config).await?;
    for line in sitemapd::app::robots_lines(&store, config).await? {
        println!("{line}");
    }
    Ok(())
}
