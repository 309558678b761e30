//! `sitemapd submit`: the IndexNow backlog and the index submissions, now.

use std::process::ExitCode;

use sitemapd::config::Config;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print what would be sent next, and send nothing.
    #[arg(long)]
    dry_run: bool,
}

pub(super) async fn run(config: &Config, args: Args) -> anyhow::Result<ExitCode> {
    let store = super::connect_placed(config).await?;
    let announcers = sitemapd::app::announcers(&store, config);
    let (lines, all_taken) = announcers.submit_now(args.dry_run).await?;
    for line in lines {
        println!("{line}");
    }
    Ok(if all_taken {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
