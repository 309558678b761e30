//! Progress of the bulk commands (`demo`, `import`) on standard error.
//!
//! On a terminal: a bar with the rate and the time left. Anywhere else (a
//! log file, CI, `docker logs`): a plain count line now and then, since a
//! redrawn bar there is a stream of carriage returns nobody can read.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{HumanCount, ProgressBar, ProgressStyle};

use sitemapd::ingest::import::Progress;

/// Records between two count lines when standard error is not a terminal.
const RECORDS_PER_LINE: u64 = 100_000;

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("a valid template")
        .progress_chars("=> ")
}

fn terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// `demo`: rows written out of `total`.
pub(super) fn rows(total: u64) -> impl FnMut(u64) {
    let bar = terminal().then(|| {
        ProgressBar::new(total).with_style(style(
            "[{bar:30}] {human_pos}/{human_len} rows ({per_sec:0}, {eta} left)",
        ))
    });
    move |written| match &bar {
        Some(bar) => {
            bar.set_position(written);
            if written >= total {
                // The summary line that follows says it all.
                bar.finish_and_clear();
            }
        }
        None => eprintln!("{written} of {total} rows written"),
    }
}

/// `import`: bytes of the file read (a bar when its size is known, a
/// spinner otherwise) and records read.
pub(super) fn import() -> impl Fn(Progress) + Send + Sync + 'static {
    let bar = terminal().then(|| {
        ProgressBar::new_spinner()
            .with_style(style(
                "{spinner} {msg}, {bytes} read ({bytes_per_sec}, {elapsed})",
            ))
            .with_message("0 records")
    });
    let lines_printed = AtomicU64::new(0);
    move |progress: Progress| match &bar {
        Some(bar) => {
            if let Some(total) = progress.total_bytes
                && bar.length() != Some(total)
            {
                bar.set_length(total);
                bar.set_style(style(
                    "[{bar:30}] {msg}, {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
                ));
            }
            bar.set_position(progress.bytes);
            bar.set_message(format!("{} records", HumanCount(progress.records)));
        }
        None => {
            let line = progress.records / RECORDS_PER_LINE;
            if line > lines_printed.fetch_max(line, Ordering::Relaxed) {
                match progress.total_bytes {
                    Some(total) => eprintln!(
                        "{} records read ({}% of the file)",
                        progress.records,
                        progress.bytes * 100 / total.max(1)
                    ),
                    None => eprintln!("{} records read", progress.records),
                }
            }
        }
    }
}
