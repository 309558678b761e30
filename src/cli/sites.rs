//! `sitemapd sites add|set|remove|list`: the sites, managed from a shell,
//! with the write API's rules and errors. A change shows on every running
//! replica within a second.

use std::path::PathBuf;

use std::time::Duration;

use anyhow::Context;
use sitemapd::config::Config;
use sitemapd::site::admin::Admin;
use sitemapd::site::moving::SiteMove;
use sitemapd::site::{IndexFormat, RobotsCheck, SiteSpec};
use sitemapd::store::Workload;
use sitemapd::store::{StoredSite, Written};

#[derive(Debug, clap::Subcommand)]
pub(super) enum Command {
    /// Create a site; refused if the name exists.
    Add {
        name: String,
        #[command(flatten)]
        settings: Settings,
    },
    /// Change a site: the settings given replace its own, the others stay.
    Set {
        name: String,
        #[command(flatten)]
        settings: Settings,
    },
    /// Remove a site; refused while it has URL rows, unless --purge.
    Remove {
        name: String,
        /// Delete its URL rows first, in short transactions that writers
        /// and folds do not wait on.
        #[arg(long)]
        purge: bool,
    },
    /// Move a site to another cell while both serve: copy its rows, catch
    /// up with its writes, refuse them for the switch, let both cells place
    /// the rows, check they serve the same entries, and print the proxy's
    /// line. Then switch the proxy and run again with --finish.
    Move {
        name: String,
        /// The target cell's database URL.
        #[arg(long, value_name = "DATABASE_URL")]
        to: String,
        /// The nginx upstream of the target cell's replicas, for the printed
        /// map line.
        #[arg(long, required_unless_present_any = ["finish", "abort"])]
        upstream: Option<String>,
        /// After the proxy sends the site to the target: delete it from
        /// this cell, which goes on refusing its writes.
        #[arg(long, conflicts_with = "abort")]
        finish: bool,
        /// Undo a move not yet verified: the target forgets the site and
        /// this cell takes its writes again.
        #[arg(long)]
        abort: bool,
        /// How long the switch waits for transactions begun before it.
        #[arg(long, default_value_t = 30)]
        switch_wait_s: u64,
    },
    /// List the sites by name, tab-separated: name, base URL, index; or,
    /// with --format nginx-map, their hosts as entries of an nginx `map`
    /// that sends each to this database's cell (config/nginx-cells.conf).
    List {
        /// Start after this name.
        #[arg(long)]
        after: Option<String>,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long, value_enum, default_value = "text")]
        format: ListFormat,
        /// The nginx upstream of this cell's replicas (with nginx-map).
        #[arg(long, required_if_eq("format", "nginx-map"))]
        upstream: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ListFormat {
    Text,
    NginxMap,
}

/// A site's settings as options; what is not given is left as it is (`set`)
/// or takes its default (`add`).
#[derive(Debug, clap::Args)]
pub(super) struct Settings {
    /// The public base URL.
    #[arg(long)]
    base_url: Option<String>,
    /// The operator's robots.txt for the site's host, as text.
    #[arg(long, conflicts_with = "robots_file")]
    robots_txt: Option<String>,
    /// The operator's robots.txt, from a file.
    #[arg(long)]
    robots_file: Option<PathBuf>,
    /// Whether its index also lists the sites under its base URL.
    #[arg(long)]
    include_subfolder_sites: Option<bool>,
    /// Its IndexNow key ("" for none).
    #[arg(long)]
    indexnow_key: Option<String>,
    /// Which name of its index robots.txt announces.
    #[arg(long, value_parser = ["xml", "xml.gz"])]
    index_format: Option<String>,
    /// Whether an index split in several files is served as an index of them.
    #[arg(long)]
    nested_index: Option<bool>,
    /// What becomes of a loc its host's robots.txt disallows.
    #[arg(long, value_parser = ["leave-out", "report", "off"])]
    robots_check: Option<String>,
    /// The user agents its locs are checked for, comma-separated.
    #[arg(long, value_delimiter = ',')]
    robots_check_agents: Option<Vec<String>>,
    /// Whether its listed URLs are fetched from the live site and checked.
    #[arg(long)]
    audit: Option<bool>,
    /// Where the audit fetches from instead of the site's origin ("" for
    /// the site's own).
    #[arg(long)]
    audit_origin: Option<String>,
    /// The audit's requests a second, at most.
    #[arg(long)]
    audit_requests_per_second: Option<f64>,
    /// The audit's User-Agent ("" for the default).
    #[arg(long)]
    audit_user_agent: Option<String>,
    /// How long an unchanged URL's check holds ("30d").
    #[arg(long)]
    audit_interval: Option<String>,
    /// Findings that leave a URL out, comma-separated ("" for none).
    #[arg(long, value_delimiter = ',')]
    audit_leave_out: Option<Vec<String>>,
}

impl Settings {
    /// `base`'s settings with these laid over.
    fn over(self, mut base: SiteSpec) -> anyhow::Result<SiteSpec> {
        if let Some(base_url) = self.base_url {
            base.base_url = base_url;
        }
        if let Some(text) = self.robots_txt {
            base.robots_txt = Some(text).filter(|text| !text.is_empty());
        }
        if let Some(path) = self.robots_file {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("--robots-file {}", path.display()))?;
            base.robots_txt = Some(text);
        }
        if let Some(include) = self.include_subfolder_sites {
            base.include_subfolder_sites = Some(include);
        }
        if let Some(key) = self.indexnow_key {
            base.indexnow_key = Some(key).filter(|key| !key.is_empty());
        }
        if let Some(format) = self.index_format {
            base.index_format = IndexFormat::parse(&format);
        }
        if let Some(nested) = self.nested_index {
            base.nested_index = Some(nested);
        }
        if let Some(check) = self.robots_check {
            base.robots_check = RobotsCheck::parse(&check);
        }
        if let Some(agents) = self.robots_check_agents {
            base.robots_check_agents = Some(agents);
        }
        if let Some(audit) = self.audit {
            base.audit = Some(audit);
        }
        if let Some(origin) = self.audit_origin {
            base.audit_origin = Some(origin).filter(|origin| !origin.is_empty());
        }
        if let Some(rate) = self.audit_requests_per_second {
            base.audit_requests_per_second = Some(rate);
        }
        if let Some(agent) = self.audit_user_agent {
            base.audit_user_agent = Some(agent).filter(|agent| !agent.is_empty());
        }
        if let Some(interval) = self.audit_interval {
            base.audit_interval = Some(interval);
        }
        if let Some(findings) = self.audit_leave_out {
            base.audit_leave_out = Some(findings.into_iter().filter(|f| !f.is_empty()).collect());
        }
        Ok(base)
    }
}

pub(super) async fn run(config: &Config, command: Command) -> anyhow::Result<()> {
    let store = super::connect(config, Workload::Serving).await?;
    let admin = Admin {
        store: &store,
        defaults: config.site_defaults(),
        proxy_strips_prefix: config.settings.proxy_strips_prefix,
    };
    match command {
        Command::Add { name, settings } => {
            if settings.base_url.is_none() {
                anyhow::bail!("sites add {name}: --base-url is required");
            }
            let spec = settings.over(SiteSpec::default())?;
            let site = admin.add(&name, &spec).await?;
            println!("created site {name} at {}", site.base_url);
        }
        Command::Set { name, settings } => {
            let current = admin.get(&name).await?;
            let spec = settings.over(SiteSpec::of(&current.site))?;
            let (_, outcome, _) = admin.put(&name, &spec).await?;
            match outcome {
                Written::Unchanged => println!("site {name} is already so"),
                Written::Changed | Written::Created => println!("changed site {name}"),
            }
        }
        Command::Remove { name, purge } => {
            let deleted = admin.remove(&name, purge).await?;
            println!("removed site {name} ({deleted} URL rows deleted)");
        }
        Command::Move {
            name,
            to,
            upstream,
            finish,
            abort,
            switch_wait_s,
        } => {
            if let Some(upstream) = &upstream {
                check_upstream(upstream)?;
            }
            let target_config = config.on_database(&to).context("--to")?;
            let target_store = super::open(&target_config, Workload::Bulk).await?;
            let target = Admin {
                store: &target_store,
                ..admin
            };
            let moving = SiteMove {
                source: admin,
                target,
                target_name: target_config.settings.database_url.redacted(),
                source_name: config.settings.database_url.redacted(),
                switch_wait: Duration::from_secs(switch_wait_s),
            };
            if finish {
                let deleted = moving.finish(&name).await?;
                println!("finished: site {name} and its {deleted} URL rows deleted from this cell");
            } else if abort {
                let deleted = moving.abort(&name).await?;
                println!(
                    "aborted: the target forgot site {name} ({deleted} rows); this cell takes its writes again"
                );
            } else {
                let moved = moving.run(&name, |step| println!("{step}")).await?;
                println!(
                    "moved site {name}: {} rows copied in {} rounds, {:.1} s; writes refused for {:.1} s",
                    moved.rows_copied,
                    moved.rounds,
                    moved.took.as_secs_f64(),
                    moved.writes_refused_for.as_secs_f64()
                );
                println!(
                    "switch the proxy: this line now belongs in the target's map (both cells' \
                     `sites list --format nginx-map` say so), then `nginx -s reload`:"
                );
                println!(
                    "{:?} {};",
                    moved.site.host(),
                    upstream.as_deref().unwrap_or_default()
                );
                println!(
                    "then delete it here: sitemapd sites move {name} --to <DATABASE_URL> --finish"
                );
            }
        }
        Command::List {
            after,
            limit,
            format,
            upstream,
        } => {
            let upstream = upstream.unwrap_or_default();
            let mut elsewhere = std::collections::HashSet::new();
            if format == ListFormat::NginxMap {
                check_upstream(&upstream)?;
                println!("# sitemapd sites list --format nginx-map --upstream {upstream}");
                elsewhere = admin.routed_elsewhere().await?;
            }
            let mut hosts = std::collections::HashSet::new();
            let mut after = after;
            let mut left = limit.unwrap_or(u32::MAX);
            while left > 0 {
                let page = admin.list(after.as_deref(), left.min(1000)).await?;
                let Some(last) = page.last() else { break };
                after = Some(last.site.name.clone());
                left = left.saturating_sub(page.len() as u32);
                for entry in &page {
                    match format {
                        ListFormat::Text => println!("{}", line(entry)),
                        // Sites on one host (path prefixes) are one entry.
                        ListFormat::NginxMap if elsewhere.contains(&entry.site.name) => {}
                        ListFormat::NginxMap => {
                            if hosts.insert(entry.site.host().to_owned()) {
                                println!("{:?} {upstream};", entry.site.host());
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_upstream(upstream: &str) -> anyhow::Result<()> {
    if upstream.is_empty()
        || !upstream
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        anyhow::bail!(
            "--upstream {upstream:?}: an nginx upstream name, of letters, digits, _ and -"
        );
    }
    Ok(())
}

fn line(entry: &StoredSite) -> String {
    let site = &entry.site;
    let spec = SiteSpec::of(site);
    let index = match spec.index_format {
        Some(IndexFormat::XmlGz) => "sitemap_index.xml.gz",
        _ => "sitemap_index.xml",
    };
    format!("{}\t{}\t{}{index}", site.name, site.base_url, site.base_url)
}
