//! `sitemapd robots`: the `Sitemap:` lines for robots.txt. Sites with more
//! pages than an index file lists have several index files: the database
//! says how many there are now.

use sitemapd::config::Config;
use sitemapd::pages::sitemap_lines;

pub(super) async fn run(config: &Config) -> anyhow::Result<()> {
    let store = super::connect_placed(config).await?;
    let sites = sitemapd::app::sites(config);
    let indexes = sitemapd::app::indexes(store, config);
    for site in sites.all().iter().filter(|site| !sites.is_held(site)) {
        let files = indexes.announced(&sites.index_members(site)).await?;
        for line in sitemap_lines(site, &files, indexes.format) {
            println!("{line}");
        }
    }
    Ok(())
}
