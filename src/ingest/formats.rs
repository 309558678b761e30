//! Reading records from files: JSON Lines, CSV with a header row, and
//! existing sitemaps (a `<urlset>`, or a `<sitemapindex>` whose children are
//! read from beside it), plain or gzipped.
//!
//! Readers push records one at a time to a callback, so any file streams in
//! bounded memory. A record that cannot even be parsed (a bad JSON line) is
//! handed on as a rejected record at its position; only what makes the rest
//! of the input unreadable (I/O, broken XML, an unknown CSV column) stops
//! the read.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::read::MultiGzDecoder;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

use super::rule::Rule;
use super::sitemap_entry::{Dropped, EntryReader, Namespace};
use super::validate::{FieldError, QUOTE_CHARS, RECORD_FIELDS, RawRecord};
use crate::quote::truncated;

/// Where a record sits in the input, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// 1-based line of a JSON Lines or CSV file.
    Line(u64),
    /// 1-based `<url>` of a sitemap file.
    Entry { file: String, index: u64 },
    /// 0-based element of a JSON array (a write API request).
    Index(u64),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line(line) => write!(f, "line {line}"),
            Position::Entry { file, index } => write!(f, "{file}, <url> {index}"),
            Position::Index(index) => write!(f, "record [{index}]"),
        }
    }
}

/// A record read, or why it could not be parsed.
pub(crate) type Parsed = Result<RawRecord, FieldError>;

/// Why the input cannot be read (any further).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading {input}: {source}")]
    Io {
        input: String,
        source: std::io::Error,
    },
    #[error(
        "{input}: unknown column {column:?} (expected some of loc, lastmod, changefreq, priority, section, site, \
         visible_from, visible_until; \
         pass --ignore-unknown-fields to ignore the others)"
    )]
    UnknownColumn { input: String, column: String },
    #[error("{input}: no loc column")]
    NoLocColumn { input: String },
    #[error("{input}: {message}")]
    Csv { input: String, message: String },
    #[error("{input}: not a sitemap: {message}")]
    Xml { input: String, message: String },
    /// The consumer stopped the read (e.g. the database went away).
    #[error("stopped")]
    Stopped,
}

/// The input formats `sitemapd import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
    Sitemap,
}

impl Format {
    /// The format a file's name says, if it says one: `.jsonl` or `.ndjson`,
    /// `.csv`, `.xml`, each optionally followed by `.gz`.
    pub(crate) fn of_file_name(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        match name.rsplit_once('.')?.1 {
            "jsonl" | "ndjson" => Some(Format::Jsonl),
            "csv" => Some(Format::Csv),
            "xml" => Some(Format::Sitemap),
            _ => None,
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "jsonl" => Ok(Format::Jsonl),
            "csv" => Ok(Format::Csv),
            "sitemap" => Ok(Format::Sitemap),
            other => Err(format!("unknown format {other:?}: jsonl, csv or sitemap")),
        }
    }
}

/// What to read: a file, or standard input (`-`).
#[derive(Debug, Clone)]
pub enum Input {
    File(PathBuf),
    Stdin,
}

impl Input {
    pub(crate) fn name(&self) -> String {
        match self {
            Input::File(path) => path.display().to_string(),
            Input::Stdin => "standard input".to_owned(),
        }
    }

    /// The file's size on disk (none for standard input).
    pub(crate) fn size(&self) -> Option<u64> {
        match self {
            Input::File(path) => std::fs::metadata(path).ok().map(|m| m.len()),
            Input::Stdin => None,
        }
    }

    /// The input's bytes, decompressed when they are gzip; `bytes_read`
    /// counts them as they come off the file, before decompression.
    fn open(&self, bytes_read: &Arc<AtomicU64>) -> Result<Box<dyn BufRead + Send>, ReadError> {
        let io = |source| ReadError::Io {
            input: self.name(),
            source,
        };
        let raw: Box<dyn Read + Send> = match self {
            Input::File(path) => Box::new(File::open(path).map_err(io)?),
            Input::Stdin => Box::new(std::io::stdin()),
        };
        let raw = Counted {
            inner: raw,
            count: Arc::clone(bytes_read),
        };
        let mut buffered = BufReader::with_capacity(1 << 16, raw);
        let is_gzip = buffered.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        Ok(if is_gzip {
            Box::new(BufReader::with_capacity(
                1 << 16,
                MultiGzDecoder::new(buffered),
            ))
        } else {
            Box::new(buffered)
        })
    }
}

/// Counts the bytes that pass through a reader.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.count.fetch_add(read as u64, Ordering::Relaxed);
        Ok(read)
    }
}

/// How to read an input.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Ignore (and count) JSON fields and CSV columns records do not have,
    /// instead of refusing them.
    pub(crate) ignore_unknown_fields: bool,
    /// The input's bytes read so far (compressed, for gzip), for progress.
    pub(crate) bytes_read: Arc<AtomicU64>,
}

/// What the input held that records do not carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unread {
    /// Sitemap elements sitemapd never serves, by element.
    pub(crate) dropped: Dropped,
    /// Fields and columns ignored by `--ignore-unknown-fields`, by name:
    /// how many values each held.
    pub(crate) ignored: Dropped,
}

/// Distinct ignored names counted one by one; the rest are counted together,
/// so a file of ever-new keys cannot grow the report without bound.
const IGNORED_NAMES: usize = 100;

fn count_ignored(ignored: &mut Dropped, name: &str) {
    let name = if ignored.len() < IGNORED_NAMES || ignored.contains_key(name) {
        truncated(name, QUOTE_CHARS)
    } else {
        "(other names)".to_owned()
    };
    *ignored.entry(name).or_default() += 1;
}

/// Reads every record of `input`, handing each to `each` with its position.
/// `each` returns false to stop the read. Returns what the input held that
/// records do not carry.
pub fn read(
    format: Format,
    input: &Input,
    options: &ReadOptions,
    each: &mut dyn FnMut(Position, Parsed) -> bool,
) -> Result<Unread, ReadError> {
    let mut unread = Unread::default();
    match format {
        Format::Jsonl => read_jsonl(input, options, &mut unread.ignored, each)?,
        Format::Csv => read_csv(input, options, &mut unread.ignored, each)?,
        Format::Sitemap => unread.dropped = read_sitemap(input, &options.bytes_read, each)?,
    }
    Ok(unread)
}

fn read_jsonl(
    input: &Input,
    options: &ReadOptions,
    ignored: &mut Dropped,
    each: &mut dyn FnMut(Position, Parsed) -> bool,
) -> Result<(), ReadError> {
    let mut reader = input.open(&options.bytes_read)?;
    // One buffer for every line: a million lines, a million allocations less.
    let mut line = String::with_capacity(512);
    for i in 0.. {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .map_err(|source| ReadError::Io {
                input: input.name(),
                source,
            })?;
        if read == 0 {
            break;
        }
        let text = line.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        let parsed = match serde_json::from_str::<RawRecord>(text) {
            Err(e) if options.ignore_unknown_fields && is_unknown_field(&e) => {
                parse_known_fields(text, ignored)
            }
            parsed => parsed,
        }
        .map_err(|e| FieldError {
            field: "record".into(),
            value: truncated(text, QUOTE_CHARS),
            rule: Rule::Record {
                expected: format!("a JSON object of {}", RECORD_FIELDS.join(", ")),
                problem: e.to_string(),
                unknown_field_hint: is_unknown_field(&e),
            },
        });
        if !each(Position::Line(i + 1), parsed) {
            return Err(ReadError::Stopped);
        }
    }
    Ok(())
}

fn is_unknown_field(error: &serde_json::Error) -> bool {
    error.is_data() && error.to_string().starts_with("unknown field")
}

/// A record from a line that has fields records do not, which are counted
/// in `ignored` and left out. Only lines with such fields take this slower
/// path.
fn parse_known_fields(line: &str, ignored: &mut Dropped) -> serde_json::Result<RawRecord> {
    let mut object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)?;
    object.retain(|name, _| {
        let known = RECORD_FIELDS.contains(&name.as_str());
        if !known {
            count_ignored(ignored, name);
        }
        known
    });
    serde_json::from_value(serde_json::Value::Object(object))
}

/// A CSV file's columns: the records' text fields (the extensions are
/// JSON, read from JSON Lines).
const COLUMNS: [&str; 8] = [
    "loc",
    "lastmod",
    "changefreq",
    "priority",
    "section",
    "site",
    "visible_from",
    "visible_until",
];

fn read_csv(
    input: &Input,
    options: &ReadOptions,
    ignored: &mut Dropped,
    each: &mut dyn FnMut(Position, Parsed) -> bool,
) -> Result<(), ReadError> {
    let csv_error = |e: csv::Error| ReadError::Csv {
        input: input.name(),
        message: e.to_string(),
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(input.open(&options.bytes_read)?);
    let headers = reader.headers().map_err(csv_error)?.clone();
    // Each header's field, or none for an ignored column.
    let mut columns = Vec::with_capacity(headers.len());
    for header in &headers {
        let name = header.trim();
        match COLUMNS.iter().position(|c| *c == name) {
            Some(i) => columns.push(Some(i)),
            None if options.ignore_unknown_fields => columns.push(None),
            None => {
                return Err(ReadError::UnknownColumn {
                    input: input.name(),
                    column: name.to_owned(),
                });
            }
        }
    }
    if !columns.contains(&Some(0)) {
        return Err(ReadError::NoLocColumn {
            input: input.name(),
        });
    }
    let mut row = csv::StringRecord::new();
    while reader.read_record(&mut row).map_err(csv_error)? {
        let line = row.position().map_or(0, csv::Position::line);
        let mut record = RawRecord::default();
        for ((value, column), header) in row.iter().zip(&columns).zip(&headers) {
            let Some(column) = column else {
                if !value.is_empty() {
                    count_ignored(ignored, header.trim());
                }
                continue;
            };
            let value = (!value.is_empty()).then(|| value.to_owned());
            let slot = match column {
                0 => &mut record.loc,
                1 => &mut record.lastmod,
                2 => &mut record.changefreq,
                3 => &mut record.priority,
                4 => &mut record.section,
                5 => &mut record.site,
                6 => &mut record.visible_from,
                _ => &mut record.visible_until,
            };
            *slot = value;
        }
        if !each(Position::Line(line), Ok(record)) {
            return Err(ReadError::Stopped);
        }
    }
    Ok(())
}

fn read_sitemap(
    input: &Input,
    bytes_read: &Arc<AtomicU64>,
    each: &mut dyn FnMut(Position, Parsed) -> bool,
) -> Result<Dropped, ReadError> {
    let file_name = match input {
        Input::File(path) => path
            .file_name()
            .map_or_else(|| input.name(), |n| n.to_string_lossy().into_owned()),
        Input::Stdin => input.name(),
    };
    let mut children = Vec::new();
    let mut dropped = Dropped::new();
    let root = read_sitemap_file(
        input,
        bytes_read,
        &file_name,
        each,
        &mut children,
        &mut dropped,
    )?;
    if root != Root::Index {
        return Ok(dropped);
    }
    // An index's children are read from the index file's folder, by the
    // last segment of their loc.
    let folder = match input {
        Input::File(path) => path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        Input::Stdin => PathBuf::from("."),
    };
    for loc in children {
        let name = loc
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let child = Input::File(folder.join(&name));
        let mut nested = Vec::new();
        if read_sitemap_file(&child, bytes_read, &name, each, &mut nested, &mut dropped)?
            == Root::Index
        {
            return Err(ReadError::Xml {
                input: child.name(),
                message:
                    "a sitemap index inside a sitemap index (crawlers do not read nested indexes)"
                        .into(),
            });
        }
    }
    Ok(dropped)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    Urlset,
    Index,
}

/// Streams one sitemap file: `<url>` entries go to `each`, `<sitemap>`
/// locs to `children`; what is dropped is counted in `dropped`.
fn read_sitemap_file(
    input: &Input,
    bytes_read: &Arc<AtomicU64>,
    file_name: &str,
    each: &mut dyn FnMut(Position, Parsed) -> bool,
    children: &mut Vec<String>,
    dropped: &mut Dropped,
) -> Result<Root, ReadError> {
    let xml_error = |message: String| ReadError::Xml {
        input: input.name(),
        message,
    };
    let mut reader = quick_xml::NsReader::from_reader(input.open(bytes_read)?);
    let mut buf = Vec::new();
    let mut root = None;
    // The entry being read, and how many elements are open inside it.
    let mut entry: Option<(EntryReader, usize)> = None;
    let mut index = 0;
    let mut emit = |root: Option<Root>, reader: EntryReader| {
        index += 1;
        let record = reader.finish();
        if root == Some(Root::Index) {
            children.extend(record.loc);
            true
        } else {
            each(
                Position::Entry {
                    file: file_name.to_owned(),
                    index,
                },
                Ok(record),
            )
        }
    };
    loop {
        let (resolved, event) = reader
            .read_resolved_event_into(&mut buf)
            .map_err(|e| xml_error(e.to_string()))?;
        let namespace = match resolved {
            ResolveResult::Bound(uri) => Namespace::of(uri.as_ref()),
            _ => Namespace::Sitemap,
        };
        match event {
            Event::Start(ref element) | Event::Empty(ref element) => {
                let closed = matches!(event, Event::Empty(_));
                let local = element.local_name();
                let name: &str = local.as_ref();
                if let Some((reader, depth)) = entry.as_mut() {
                    let mut attributes = Vec::new();
                    for attribute in element.attributes() {
                        let attribute = attribute.map_err(|e| xml_error(e.to_string()))?;
                        let value = attribute
                            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                            .map_err(|e| xml_error(e.to_string()))?;
                        let key = attribute.key.local_name();
                        let key: &str = key.as_ref();
                        attributes.push((key.to_owned(), value.into_owned()));
                    }
                    reader.start(namespace, name, &attributes, dropped);
                    if closed {
                        reader.end();
                    } else {
                        *depth += 1;
                    }
                    buf.clear();
                    continue;
                }
                match (root, name) {
                    (None, "urlset") => root = Some(Root::Urlset),
                    (None, "sitemapindex") => root = Some(Root::Index),
                    (None, other) => {
                        return Err(xml_error(format!(
                            "the root element is <{other}>, not <urlset> or <sitemapindex>"
                        )));
                    }
                    (Some(Root::Urlset), "url") | (Some(Root::Index), "sitemap") => {
                        if closed {
                            if !emit(root, EntryReader::default()) {
                                return Err(ReadError::Stopped);
                            }
                        } else {
                            entry = Some((EntryReader::default(), 0));
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(t) => {
                if let Some((reader, _)) = entry.as_mut() {
                    reader.text(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some((reader, _)) = entry.as_mut() {
                    reader.text(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                if let Some((reader, _)) = entry.as_mut() {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(c)) => Some(c.to_string()),
                        _ => quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                            .map(str::to_owned),
                    };
                    let resolved = resolved.ok_or_else(|| {
                        xml_error(format!("unknown entity &{};", r.xml10_content()))
                    })?;
                    reader.text(&resolved);
                }
            }
            Event::End(_) => {
                if let Some((reader, depth)) = entry.as_mut()
                    && *depth > 0
                {
                    reader.end();
                    *depth -= 1;
                } else if let Some((reader, _)) = entry.take()
                    && !emit(root, reader)
                {
                    return Err(ReadError::Stopped);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    root.ok_or_else(|| xml_error("empty document".into()))
}
