//! `sitemapd import`: records from a file into `sitemap_urls`, validated,
//! all or nothing.
//!
//! A reader thread parses and validates, puts the rows, already encoded for
//! `COPY`, in key order without duplicates ([`super::sort`], spilling to
//! temporary files past a memory budget), and hands them in batches over a
//! bounded channel (so memory stays bounded whatever the file's size) to
//! one transaction that copies them into a staging table and then applies
//! them in one upsert. The upsert changes a row only where a field differs,
//! so importing the same file twice changes nothing and moves no lastmod.
//! Until the commit nothing is visible, and an import that fails or is
//! killed leaves the table as it was.

use std::fmt::Write as _;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::mpsc;

use super::formats::{self, Format, Input, Position, ReadError, ReadOptions};
use super::sitemap_entry::Dropped;
use super::sort::{KeySorter, RUN_BYTES, sort_in_memory};
use super::validate::{FieldError, Record, Validator};
use crate::site::Site;
use crate::sitemap::name::parse_slug;
use crate::store::{self, ImportCounts, Store};

/// Rows per batch sent to the database.
const BATCH_ROWS: usize = 10_000;
/// Batches waiting for the database at most: the bound on memory.
const BATCHES_IN_FLIGHT: usize = 4;

/// How an import reads and writes; also `sitemapd import`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportOptions {
    /// jsonl, csv (with a header row) or sitemap (a sitemap or a sitemap
    /// index whose children sit beside it). Default: what the file's name
    /// says (.jsonl or .ndjson, .csv, .xml, each optionally .gz); needed
    /// for - and for other names.
    #[arg(long)]
    pub format: Option<Format>,
    /// Ignore JSON fields and CSV columns that records do not have (counted
    /// in the report), instead of refusing them.
    #[arg(long)]
    pub ignore_unknown_fields: bool,
    /// Site of records that name none (default: the primary site).
    #[arg(long)]
    pub site: Option<String>,
    /// Section of records that name none (default: the default section).
    #[arg(long, value_parser = parse_slug)]
    pub section: Option<String>,
    /// Validate and report what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Make the section hold exactly the file's URLs: its rows absent from
    /// the file are deleted, in the same transaction.
    #[arg(long)]
    pub replace: bool,
    /// Write the valid records even if some are invalid.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Rejected records reported in detail (all are counted).
    #[arg(long = "max-errors", value_name = "N", default_value_t = 100)]
    pub max_reported: usize,
}

/// A rejected record: where, and every rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub position: Position,
    pub errors: Vec<FieldError>,
}

/// What an import read, and what it did or (dry run, rejection) would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub read: u64,
    pub invalid: u64,
    /// The first `max_reported` rejections.
    pub rejected: Vec<Rejected>,
    pub counts: ImportCounts,
    /// Sitemap elements read and left out (never served), by qualified
    /// name, with how many.
    pub dropped: Dropped,
    /// Unknown JSON fields or CSV columns ignored (`--ignore-unknown-fields`),
    /// by name, with how many values each held.
    pub ignored: Dropped,
    /// Whether the changes were committed.
    pub written: bool,
}

/// Why an import could not run at all (usage or I/O: exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{input}: pass --format (jsonl, csv or sitemap); {why}")]
    FormatNeeded { input: String, why: &'static str },
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Store(#[from] store::Error),
}

/// How far an import has read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub records: u64,
    /// Bytes of the input read (before decompression).
    pub bytes: u64,
    /// The input's size, when it is one file of known size.
    pub total_bytes: Option<u64>,
}

/// Records between two progress reports.
const PROGRESS_RECORDS: u64 = 10_000;

/// The format `options` name, or else the one the input's name says.
fn format_of(input: &Input, options: &ImportOptions) -> Result<Format, ImportError> {
    if let Some(format) = options.format {
        return Ok(format);
    }
    match input {
        Input::Stdin => Err(ImportError::FormatNeeded {
            input: input.name(),
            why: "standard input has no name to tell it by",
        }),
        Input::File(path) => Format::of_file_name(path).ok_or(ImportError::FormatNeeded {
            input: input.name(),
            why: "its name does not end in .jsonl, .ndjson, .csv or .xml (optionally .gz)",
        }),
    }
}

/// Imports `input` per `options`, calling `progress` as it reads.
pub async fn import(
    store: &Store,
    sites: &[Site],
    input: Input,
    options: &ImportOptions,
    progress: impl Fn(Progress) + Send + Sync + 'static,
) -> Result<ImportReport, ImportError> {
    let format = format_of(&input, options)?;
    let site = options
        .site
        .clone()
        .unwrap_or_else(|| sites[0].name.clone());
    let section = options.section.clone().unwrap_or_default();
    let (tx, rx) = mpsc::channel::<Vec<u8>>(BATCHES_IN_FLIGHT);
    let reader = {
        let sites = sites.to_vec();
        let (site, section, options) = (site.clone(), section.clone(), options.clone());
        tokio::task::spawn_blocking(move || {
            let reading = Reading {
                format,
                input: &input,
                options: &options,
                tx: &tx,
                progress: &progress,
            };
            read_and_validate(&sites, &site, &section, &reading)
        })
    };
    let mut session = store.begin_import().await?;
    let batches = futures_util::stream::unfold(rx, |mut rx| async {
        rx.recv().await.map(|batch| (batch, rx))
    });
    session.copy(batches).await?;
    let mut report = reader.await.map_err(|e| ReadError::Io {
        input: "the reader thread".into(),
        source: std::io::Error::other(e),
    })??;
    let replace = options.replace.then_some((site.as_str(), section.as_str()));
    report.counts = session.apply(replace).await?;
    let rejected_all = report.invalid > 0 && !options.skip_invalid;
    if options.dry_run || rejected_all {
        session.rollback().await?;
    } else {
        session.commit().await?;
        report.written = true;
    }
    Ok(report)
}

/// Upserts validated records in one transaction, as an import does: all
/// applied or none, and a record identical to its row changes nothing.
pub async fn write_records(
    store: &Store,
    records: &[Record],
) -> Result<ImportCounts, store::Error> {
    let mut rows = Vec::with_capacity(records.len() * 128);
    for (order, record) in (1..).zip(records) {
        encode_copy_row(&mut rows, order, record);
    }
    let mut session = store.begin_import().await?;
    let rows = sort_in_memory(&rows, KEY_FIELDS);
    session.copy(futures_util::stream::iter([rows])).await?;
    let counts = session.apply(None).await?;
    session.commit().await?;
    Ok(counts)
}

/// What the reader thread reads, how, and where it sends rows and progress.
struct Reading<'a> {
    format: Format,
    input: &'a Input,
    options: &'a ImportOptions,
    tx: &'a mpsc::Sender<Vec<u8>>,
    progress: &'a dyn Fn(Progress),
}

fn read_and_validate(
    sites: &[Site],
    site: &str,
    section: &str,
    reading: &Reading<'_>,
) -> Result<ImportReport, ImportError> {
    let Reading {
        format,
        input,
        options,
        tx,
        progress,
    } = *reading;
    let validator = Validator::new(sites, site, section, OffsetDateTime::now_utc());
    let read_options = ReadOptions {
        ignore_unknown_fields: options.ignore_unknown_fields,
        ..ReadOptions::default()
    };
    // A sitemap index's children are read too, beyond its own size.
    let total_bytes = input.size().filter(|_| format != Format::Sitemap);
    let report_progress = |records| {
        progress(Progress {
            records,
            bytes: read_options
                .bytes_read
                .load(std::sync::atomic::Ordering::Relaxed),
            total_bytes,
        });
    };
    let mut report = ImportReport::default();
    let mut sorter = KeySorter::new(KEY_FIELDS, RUN_BYTES);
    let mut row = Vec::with_capacity(256);
    let mut spill_error = None;
    let mut each = |position: Position, parsed: formats::Parsed| {
        report.read += 1;
        if report.read.is_multiple_of(PROGRESS_RECORDS) {
            report_progress(report.read);
        }
        match validator.validate_parsed(parsed) {
            Ok(record) => {
                row.clear();
                encode_copy_row(&mut row, report.read, &record);
                if let Err(e) = sorter.push(&row) {
                    spill_error = Some(e);
                    return false;
                }
            }
            Err(errors) => {
                report.invalid += 1;
                if report.rejected.len() < options.max_reported {
                    report.rejected.push(Rejected { position, errors });
                }
            }
        }
        true
    };
    let unread = formats::read(format, input, &read_options, &mut each)?;
    report.dropped = unread.dropped;
    report.ignored = unread.ignored;
    if let Some(e) = spill_error {
        return Err(sort_failed(e));
    }
    report_progress(report.read);
    let mut batch = Vec::with_capacity(BATCH_ROWS * 128);
    let mut rows = 0;
    let sent = sorter
        .finish(|row| {
            batch.extend_from_slice(row);
            rows += 1;
            if rows < BATCH_ROWS {
                return true;
            }
            rows = 0;
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_ROWS * 128));
            tx.blocking_send(full).is_ok()
        })
        .map_err(sort_failed)?;
    if !sent || (!batch.is_empty() && tx.blocking_send(batch).is_err()) {
        return Err(ReadError::Stopped.into());
    }
    Ok(report)
}

fn sort_failed(source: std::io::Error) -> ImportError {
    ReadError::Io {
        input: "the sort's temporary files".into(),
        source,
    }
    .into()
}

/// Leading fields of a staging row that make its key: site and loc.
const KEY_FIELDS: usize = 2;

/// One row of `COPY … FROM STDIN` text format, in the staging table's
/// column order: tab-separated, `\N` for NULL. Validated values hold no
/// tab, newline or control character; a backslash is escaped all the same.
/// The key comes first and the record's number, zero-padded, next, so the
/// row's bytes sort by key and then by arrival.
fn encode_copy_row(out: &mut Vec<u8>, order: u64, record: &Record) {
    let mut line = String::with_capacity(record.loc.len() + 80);
    line.push_str(&record.site);
    line.push('\t');
    line.push_str(&record.loc.replace('\\', "\\\\"));
    let _ = write!(line, "\t{order:020}\t{}\t", record.section);
    match record.lastmod.and_then(|t| t.format(&Rfc3339).ok()) {
        Some(lastmod) => line.push_str(&lastmod),
        None => line.push_str("\\N"),
    }
    line.push('\t');
    line.push_str(record.changefreq.unwrap_or("\\N"));
    line.push('\t');
    match record.priority {
        Some(priority) => {
            let _ = write!(line, "{priority}");
        }
        None => line.push_str("\\N"),
    }
    for json in [
        record.images.as_ref().map(serde_json::to_string),
        record.videos.as_ref().map(serde_json::to_string),
        record.news.as_ref().map(serde_json::to_string),
    ] {
        line.push('\t');
        match json {
            // Compact JSON holds no raw tab or newline; its escapes' backslashes double.
            Some(Ok(json)) => line.push_str(&json.replace('\\', "\\\\")),
            _ => line.push_str("\\N"),
        }
    }
    match &record.membership {
        Some(membership) => {
            // Validated hreflang values are letters and hyphens.
            let _ = write!(
                line,
                "\t{{{}}}\t{}",
                membership.hreflang.join(","),
                membership.cluster.replace('\\', "\\\\")
            );
        }
        None => line.push_str("\t\\N\t\\N"),
    }
    line.push('\n');
    out.extend_from_slice(line.as_bytes());
}
