//! `sitemapd import`: records from a file into `sitemap_urls`, validated,
//! all or nothing.
//!
//! A reader thread parses, a second one validates and puts the rows, already
//! encoded for `COPY`, in key order without duplicates ([`super::sort`], spilling to
//! temporary files past a memory budget), and hands them in batches over a
//! bounded channel (so memory stays bounded whatever the file's size) to
//! one transaction that copies them into a staging table and then applies
//! them in one upsert. The upsert changes a row only where a field differs,
//! so importing the same file twice changes nothing and moves no lastmod.
//! A first load, where every record is new, skips the staging table and
//! copies straight into `sitemap_urls`. Reading begins before the database
//! is reached ([`begin`]), so connecting costs the import nothing.
//! Until the commit nothing is visible, and an import that fails or is
//! killed leaves the table as it was.

use std::io::Write as _;
use std::sync::Arc;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::mpsc;

use super::formats::{self, Format, Input, Position, ReadError, ReadOptions};
use super::sitemap_entry::Dropped;
use super::sort::{KeySorter, RUN_BYTES, sort_in_memory};
use super::validate::{FieldError, Record, Validator, tenth_f32};
use crate::site::Site;
use crate::sitemap::name::parse_slug;
use crate::store::{self, Filled, ImportCounts, Store};

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

/// Imports `input` per `options`, calling `progress` as it reads: [`begin`]
/// and [`Reading::finish`] in one.
pub async fn import(
    store: &Store,
    sites: &[Site],
    input: Input,
    options: &ImportOptions,
    progress: impl Fn(Progress) + Send + Sync + 'static,
) -> Result<ImportReport, ImportError> {
    begin(sites, input, options, progress)?.finish(store).await
}

/// Starts reading `input` per `options`, calling `progress` as it reads: it
/// is parsed, validated and sorted while the caller connects to the
/// database (about 0.2 s of a 5 s import of 1M lines here), and waits for
/// [`Reading::finish`] to write it. Must be called within the runtime.
pub fn begin(
    sites: &[Site],
    input: Input,
    options: &ImportOptions,
    progress: impl Fn(Progress) + Send + Sync + 'static,
) -> Result<Reading, ImportError> {
    let format = format_of(&input, options)?;
    Ok(Reading::start(Source {
        sites: sites.to_vec(),
        input,
        options: options.clone(),
        format,
        progress: Arc::new(progress),
    }))
}

/// What an import reads, and how: all a reader thread needs, and all it
/// takes to read the input again.
#[derive(Clone)]
struct Source {
    sites: Vec<Site>,
    input: Input,
    options: ImportOptions,
    format: Format,
    progress: Arc<dyn Fn(Progress) + Send + Sync>,
}

/// An import whose input is being read; [`Reading::finish`] writes it.
/// Dropped unfinished, it writes nothing and its reader stops.
pub struct Reading {
    source: Source,
    /// Tells the reader how the rows will be written, once that is known.
    path: std::sync::mpsc::SyncSender<Path>,
    /// The optional columns the rows fill, known once all are read.
    filled: tokio::sync::oneshot::Receiver<Filled>,
    rows: mpsc::Receiver<Vec<u8>>,
    reader: tokio::task::JoinHandle<Result<ImportReport, ImportError>>,
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading")
            .field("input", &self.source.input.name())
            .field("format", &self.source.format)
            .finish_non_exhaustive()
    }
}

impl Reading {
    fn start(source: Source) -> Reading {
        let (tx, rows) = mpsc::channel::<Vec<u8>>(BATCHES_IN_FLIGHT);
        let (path, path_rx) = std::sync::mpsc::sync_channel::<Path>(1);
        let (filled_tx, filled) = tokio::sync::oneshot::channel();
        let reader = {
            let source = source.clone();
            tokio::task::spawn_blocking(move || {
                read_and_validate(&source, &path_rx, filled_tx, &tx)
            })
        };
        Reading {
            source,
            path,
            filled,
            rows,
            reader,
        }
    }

    /// Writes what is read into `store`, all or nothing, and reports.
    ///
    /// A first load (no row yet of any configured site) from a file copies
    /// the sorted rows straight into `sitemap_urls`: every record is new, so
    /// the staging table and the upsert would only copy them twice. Should
    /// another writer add one of the file's URLs meanwhile, that copy fails
    /// on the unique index, rolls back whole, and the file is imported
    /// again the usual way.
    pub async fn finish(self, store: &Store) -> Result<ImportReport, ImportError> {
        let source = &self.source;
        let names: Vec<&str> = source.sites.iter().map(|site| site.name.as_str()).collect();
        let first_load =
            matches!(source.input, Input::File(_)) && store.holds_no_rows_of(&names).await?;
        if !first_load {
            return self.write(store, Path::Upsert).await;
        }
        let again = source.clone();
        match self.write(store, Path::FirstLoad).await {
            Err(ImportError::Store(error)) if error.is_unique_violation() => tracing::info!(
                "another writer added one of the file's URLs during its first load: importing it again with an upsert"
            ),
            done => return done,
        }
        Reading::start(again).write(store, Path::Upsert).await
    }

    async fn write(self, store: &Store, path: Path) -> Result<ImportReport, ImportError> {
        let Reading {
            source,
            path: path_tx,
            filled,
            rows,
            reader,
        } = self;
        let options = &source.options;
        // A reader that stopped early (a read error) says why when joined.
        let _ = path_tx.send(path);
        let mut session = store.begin_import().await?;
        let batches = futures_util::stream::unfold(rows, |mut rows| async {
            rows.recv().await.map(|batch| (batch, rows))
        });
        // The reader says which columns the rows fill before the first
        // row; one that stopped first says why when joined.
        let copied = match filled.await {
            Ok(filled) => Some(match path {
                Path::Upsert => session.copy(filled, batches).await.map(|()| None),
                Path::FirstLoad => session.copy_new(filled, batches).await.map(Some),
            }),
            Err(_) => None,
        };
        let read = reader.await.map_err(|e| ReadError::Io {
            input: "the reader thread".into(),
            source: std::io::Error::other(e),
        })?;
        // A failed read stops the copy midway: its error says why.
        let mut report = read?;
        let copied = copied.ok_or(ReadError::Stopped)??;
        let (site, section) = target(&source.sites, options);
        let replace = options.replace.then_some((site.as_str(), section.as_str()));
        report.counts = match copied {
            None => session.apply(replace).await?,
            Some(inserted) => ImportCounts {
                inserted,
                ..ImportCounts::default()
            },
        };
        let rejected_all = report.invalid > 0 && !options.skip_invalid;
        if options.dry_run || rejected_all {
            session.rollback().await?;
        } else {
            session.commit().await?;
            report.written = true;
        }
        Ok(report)
    }
}

/// The site and section of records that name none.
fn target(sites: &[Site], options: &ImportOptions) -> (String, String) {
    let site = options
        .site
        .clone()
        .unwrap_or_else(|| sites[0].name.clone());
    (site, options.section.clone().unwrap_or_default())
}

/// How an import writes its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Staged, then upserted: rows may exist already.
    Upsert,
    /// Copied straight into `sitemap_urls`: none can.
    FirstLoad,
}

/// Upserts validated records in one transaction, as an import does: all
/// applied or none, and a record identical to its row changes nothing.
pub(crate) async fn write_records(
    store: &Store,
    records: &[Record],
) -> Result<ImportCounts, store::Error> {
    let mut rows = Vec::with_capacity(records.len() * 128);
    for (order, record) in (1..).zip(records) {
        encode_copy_row(&mut rows, order, record);
    }
    let mut session = store.begin_import().await?;
    let rows = sort_in_memory(&rows, KEY_FIELDS);
    session
        .copy(Filled::ALL, futures_util::stream::iter([rows]))
        .await?;
    let counts = session.apply(None).await?;
    session.commit().await?;
    Ok(counts)
}

/// Reads, validates and sorts `source`, then, once `path` says how they
/// will be written, tells `filled` which optional columns they fill and
/// sends them to `tx` in batches, with those columns alone.
fn read_and_validate(
    source: &Source,
    path: &std::sync::mpsc::Receiver<Path>,
    filled: tokio::sync::oneshot::Sender<Filled>,
    tx: &mpsc::Sender<Vec<u8>>,
) -> Result<ImportReport, ImportError> {
    let Source {
        sites,
        input,
        options,
        format,
        progress,
    } = source;
    let (format, progress) = (*format, progress.as_ref());
    let (site, section) = target(sites, options);
    let validator = Validator::new(sites, &site, &section, OffsetDateTime::now_utc());
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
    // Parsing on this thread, validating and sorting on a second one: the
    // database waits for the sorted rows, and both halves cost alike.
    let (parsed_tx, parsed_rx) = std::sync::mpsc::sync_channel::<
        Vec<(u64, Position, formats::Parsed)>,
    >(PARSED_BATCHES_IN_FLIGHT);
    let (unread, checked) = std::thread::scope(|scope| {
        let checking = scope.spawn(|| check_and_sort(&validator, options, parsed_rx));
        let mut pending = Vec::with_capacity(PARSED_BATCH);
        let mut each = |position: Position, parsed: formats::Parsed| {
            report.read += 1;
            if report.read.is_multiple_of(PROGRESS_RECORDS) {
                report_progress(report.read);
            }
            pending.push((report.read, position, parsed));
            pending.len() < PARSED_BATCH
                || parsed_tx
                    .send(std::mem::replace(
                        &mut pending,
                        Vec::with_capacity(PARSED_BATCH),
                    ))
                    .is_ok()
        };
        let unread = formats::read(format, input, &read_options, &mut each);
        // A checker that stopped (its sort failed) says why when joined.
        let _ = parsed_tx.send(pending);
        drop(parsed_tx);
        let checked = checking.join().map_err(|_| ReadError::Io {
            input: "the validating thread".into(),
            source: std::io::Error::other("it panicked"),
        });
        (unread, checked)
    });
    let Checked {
        sorter,
        invalid,
        rejected,
        filled: columns,
    } = checked??;
    let unread = unread?;
    report.invalid = invalid;
    report.rejected = rejected;
    report.dropped = unread.dropped;
    report.ignored = unread.ignored;
    report_progress(report.read);
    let Ok(path) = path.recv() else {
        return Err(ReadError::Stopped.into());
    };
    if filled.send(columns).is_err() {
        return Err(ReadError::Stopped.into());
    }
    let with_order = path == Path::Upsert;
    let mut batch = Vec::with_capacity(BATCH_ROWS * 128);
    let mut rows = 0;
    let sent = sorter
        .finish(|row| {
            project(&mut batch, row, with_order, columns);
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

/// Parsed records handed from the reading thread to the checking one at once.
const PARSED_BATCH: usize = 1024;
/// Such batches waiting at most.
const PARSED_BATCHES_IN_FLIGHT: usize = 8;

/// What the checking thread made of the records: the valid ones, sorted,
/// and the rejections.
struct Checked {
    sorter: KeySorter,
    invalid: u64,
    rejected: Vec<Rejected>,
    /// The optional columns some valid record fills.
    filled: Filled,
}

/// Validates each parsed record (numbered in arrival order), encodes the
/// valid ones for `COPY` and puts them in the sorter.
fn check_and_sort(
    validator: &Validator<'_>,
    options: &ImportOptions,
    parsed: std::sync::mpsc::Receiver<Vec<(u64, Position, formats::Parsed)>>,
) -> Result<Checked, ImportError> {
    let mut checked = Checked {
        sorter: KeySorter::new(KEY_FIELDS, RUN_BYTES),
        invalid: 0,
        rejected: Vec::new(),
        filled: Filled::default(),
    };
    let mut row = Vec::with_capacity(256);
    for batch in parsed {
        for (number, position, record) in batch {
            match validator.validate_parsed(record) {
                Ok(record) => {
                    row.clear();
                    let filled = encode_copy_row(&mut row, number, &record);
                    checked.filled = checked.filled.union(filled);
                    checked.sorter.push(&row).map_err(sort_failed)?;
                }
                Err(errors) => {
                    checked.invalid += 1;
                    if checked.rejected.len() < options.max_reported {
                        checked.rejected.push(Rejected { position, errors });
                    }
                }
            }
        }
    }
    Ok(checked)
}

fn sort_failed(source: std::io::Error) -> ImportError {
    ReadError::Io {
        input: "the sort's temporary files".into(),
        source,
    }
    .into()
}

/// `row` with the fields the `COPY` names: the record's number (its third
/// field) only `with_order`, and of the optional columns those `filled`.
fn project(out: &mut Vec<u8>, row: &[u8], with_order: bool, filled: Filled) {
    if with_order && filled == Filled::ALL {
        out.extend_from_slice(row);
        return;
    }
    let fields = row.strip_suffix(b"\n").unwrap_or(row);
    let mut first = true;
    for (index, field) in fields.split(|&b| b == b'\t').enumerate() {
        let kept = match index {
            ORDER_FIELD => with_order,
            index if index >= FIRST_OPTIONAL_FIELD => filled.has(index - FIRST_OPTIONAL_FIELD),
            _ => true,
        };
        if kept {
            if !first {
                out.push(b'\t');
            }
            out.extend_from_slice(field);
            first = false;
        }
    }
    out.push(b'\n');
}

/// Where a staging row holds the record's number: after site and loc.
const ORDER_FIELD: usize = 2;
/// Where its optional columns begin: after the number and section.
const FIRST_OPTIONAL_FIELD: usize = ORDER_FIELD + 2;

/// Leading fields of a staging row that make its key: site and loc.
const KEY_FIELDS: usize = 2;

/// One row of `COPY … FROM STDIN` text format, in the staging table's
/// column order: tab-separated, `\N` for NULL. Validated values hold no
/// tab, newline or control character; a backslash is escaped all the same.
/// The key comes first and the record's number, zero-padded, next, so the
/// row's bytes sort by key and then by arrival. Returns the optional
/// columns it filled.
fn encode_copy_row(out: &mut Vec<u8>, order: u64, record: &Record) -> Filled {
    const NULL: &[u8] = b"\\N";
    let mut filled = Filled::default();
    let mut optional = 0;
    let mut filled_if = |written: bool| {
        if written {
            filled = filled.with(optional);
        }
        optional += 1;
    };
    out.extend_from_slice(record.site.as_bytes());
    out.push(b'\t');
    push_escaped(out, &record.loc);
    out.push(b'\t');
    let mut digits = [b'0'; 20];
    let mut rest = order;
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.extend_from_slice(&digits);
    out.push(b'\t');
    out.extend_from_slice(record.section.as_bytes());
    out.push(b'\t');
    let before = out.len();
    let lastmod = record.lastmod.map(|t| t.format_into(&mut *out, &Rfc3339));
    let written = matches!(lastmod, Some(Ok(_)));
    if !written {
        out.truncate(before);
        out.extend_from_slice(NULL);
    }
    filled_if(written);
    out.push(b'\t');
    out.extend_from_slice(record.changefreq.map_or(NULL, str::as_bytes));
    filled_if(record.changefreq.is_some());
    out.push(b'\t');
    match record.priority {
        Some(priority) => match tenth_f32(priority) {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            None => {
                let _ = write!(out, "{priority}");
            }
        },
        None => out.extend_from_slice(NULL),
    }
    filled_if(record.priority.is_some());
    for json in [
        record.images.as_ref().map(serde_json::to_string),
        record.videos.as_ref().map(serde_json::to_string),
        record.news.as_ref().map(serde_json::to_string),
    ] {
        out.push(b'\t');
        match json {
            // Compact JSON holds no raw tab or newline; its escapes' backslashes double.
            Some(Ok(json)) => {
                push_escaped(out, &json);
                filled_if(true);
            }
            _ => {
                out.extend_from_slice(NULL);
                filled_if(false);
            }
        }
    }
    match &record.membership {
        Some(membership) => {
            // Validated hreflang values are letters and hyphens.
            let _ = write!(out, "\t{{{}}}\t", membership.hreflang.join(","));
            push_escaped(out, &membership.cluster);
        }
        None => out.extend_from_slice(b"\t\\N\t\\N"),
    }
    // A membership fills two columns, hreflang and the cluster.
    filled_if(record.membership.is_some());
    filled_if(record.membership.is_some());
    for moment in [record.visible_from, record.visible_until] {
        out.push(b'\t');
        let before = out.len();
        let written = matches!(
            moment.map(|t| t.format_into(&mut *out, &Rfc3339)),
            Some(Ok(_))
        );
        if !written {
            out.truncate(before);
            out.extend_from_slice(NULL);
        }
        filled_if(written);
    }
    out.push(b'\n');
    filled
}

/// `text` as a `COPY` text field: its backslashes doubled.
fn push_escaped(out: &mut Vec<u8>, text: &str) {
    if text.contains('\\') {
        out.extend_from_slice(text.replace('\\', "\\\\").as_bytes());
    } else {
        out.extend_from_slice(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: &[u8] = b"s\tloc\t007\tsec\tlm\tcf\tpr\tim\tvi\tne\thl\tcl\tvf\tvu\n";

    #[test]
    fn a_row_keeps_the_fields_its_copy_names() {
        let project = |with_order, filled| {
            let mut out = Vec::new();
            project(&mut out, ROW, with_order, filled);
            String::from_utf8(out).expect("utf-8")
        };
        assert_eq!(project(true, Filled::ALL).as_bytes(), ROW);
        assert_eq!(
            project(false, Filled::ALL),
            "s\tloc\tsec\tlm\tcf\tpr\tim\tvi\tne\thl\tcl\tvf\tvu\n"
        );
        assert_eq!(project(true, Filled::default()), "s\tloc\t007\tsec\n");
        let ends = Filled::default().with(0).with(9);
        assert_eq!(project(false, ends), "s\tloc\tsec\tlm\tvu\n");
        assert_eq!(
            project(true, Filled::default().with(6).with(7)),
            "s\tloc\t007\tsec\thl\tcl\n"
        );
    }

    #[test]
    fn an_encoded_row_says_which_optional_columns_it_filled() {
        let moment = time::macros::datetime!(2026-11-27 12:00 UTC);
        let record = Record {
            site: "s".into(),
            section: String::new(),
            loc: "https://e.com/a".into(),
            lastmod: Some(moment),
            changefreq: None,
            priority: Some(0.5),
            images: None,
            videos: None,
            news: None,
            membership: None,
            visible_from: None,
            visible_until: Some(moment),
        };
        let mut row = Vec::new();
        let filled = encode_copy_row(&mut row, 7, &record);
        assert_eq!(filled, Filled::default().with(0).with(2).with(9));
        let mut projected = Vec::new();
        project(&mut projected, &row, false, filled);
        assert_eq!(
            String::from_utf8(projected).expect("utf-8"),
            "s\thttps://e.com/a\t\t2026-11-27T12:00:00Z\t0.5\t2026-11-27T12:00:00Z\n"
        );
    }
}
