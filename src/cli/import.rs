//! `sitemapd import`: records from a file, through the validator, into the
//! table in one transaction.

use std::process::ExitCode;

use sitemapd::config::Config;
use sitemapd::ingest::formats::Input;
use sitemapd::ingest::import::{self, ImportOptions, ImportReport};
use sitemapd::store::Workload;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The file, or - for standard input (gzip is recognised).
    file: String,
    #[command(flatten)]
    options: ImportOptions,
}

/// Exit code 1 when records were rejected.
pub(super) async fn run(config: &Config, args: Args) -> anyhow::Result<ExitCode> {
    let Args { file, options } = args;
    let input = if file == "-" {
        Input::Stdin
    } else {
        Input::File(file.into())
    };
    let store = super::connect(config, Workload::Bulk).await?;
    let sites = sitemapd::app::all_sites(&store).await?;
    let reading = import::begin(&sites, input, &options, super::progress::import())?;
    let report = reading.finish(&store).await?;
    print_report(&report, &options);
    Ok(if report.invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_report(report: &ImportReport, options: &ImportOptions) {
    for rejected in &report.rejected {
        let reasons: Vec<String> = rejected.errors.iter().map(ToString::to_string).collect();
        eprintln!("{}: {}", rejected.position, reasons.join("; "));
    }
    if report.invalid > report.rejected.len() as u64 {
        eprintln!(
            "… and {} more rejected records",
            report.invalid - report.rejected.len() as u64
        );
    }
    if !report.ignored.is_empty() {
        let ignored: Vec<String> = report
            .ignored
            .iter()
            .map(|(name, count)| format!("{name} ({count})"))
            .collect();
        eprintln!("ignored unknown fields: {}", ignored.join(", "));
    }
    if !report.dropped.is_empty() {
        let dropped: Vec<String> = report
            .dropped
            .iter()
            .map(|(element, count)| format!("{count} {element}"))
            .collect();
        eprintln!(
            "dropped, as sitemapd never serves them (Google deprecated most in 2022): {}",
            dropped.join(", ")
        );
    }
    let c = report.counts;
    let outcome = if report.written {
        "written"
    } else if options.dry_run {
        "dry run: nothing written"
    } else {
        "nothing written: fix the rejected records, or pass --skip-invalid to write the valid ones"
    };
    eprintln!(
        "{} records read, {} rejected; inserted {}, updated {}, unchanged {}, deleted {} ({outcome})",
        report.read, report.invalid, c.inserted, c.updated, c.unchanged, c.deleted
    );
}
