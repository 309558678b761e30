//! Property tests (proptest) of every parser that takes input from outside
//! and of the XML writer, with a fixed number of cases so CI time is
//! bounded, and a fixed seed, so CI runs the same cases every time. Cases
//! that ever failed are kept in `tests/properties.proptest-regressions` and
//! replayed first on every run.
//!
//! - Page and index file names: any request path either denotes exactly one
//!   document, whose canonical name is the path itself, or nothing.
//! - The loc validator and normaliser: never panics; what it accepts is a
//!   fixed point, under its site, within the protocol's length as served.
//! - The import readers (JSON Lines, CSV, sitemap files): never panic on any
//!   bytes, and read back exactly what was written in each format.
//! - The XML writer: for any rows, a well-formed document within its
//!   limits, valid against `sitemap.xsd`, every loc read back as written.

use std::io::Write;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use quick_xml::events::Event;
use sitemapd::config::Settings;
use sitemapd::ingest::formats::{Format, Input, ReadOptions, read};
use sitemapd::ingest::validate::{RawRecord, Validator};
use sitemapd::site::Site;
use sitemapd::sitemap::name::IndexFile;
use sitemapd::sitemap::writer::MAX_LOC_CHARS;
use sitemapd::sitemap::{PageName, UrlEntry, UrlsetWriter};
use time::OffsetDateTime;

const BASE_URL: &str = "https://www.example.com/shop/";

/// The cases CI runs are the same every time, so a red build always means
/// a change broke something; set `PROPTEST_RNG_SEED` (or `random`) to
/// explore further, and keep what that finds in the regressions file.
const CI_SEED: u64 = 0x5175_e3a9;

fn config(cases: u32) -> Config {
    let defaults = Config::default();
    let rng_seed = match std::env::var("PROPTEST_RNG_SEED").as_deref() {
        Ok("random") => RngSeed::Random,
        Ok(_) => defaults.rng_seed,
        Err(_) => RngSeed::Fixed(CI_SEED),
    };
    Config {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/properties.proptest-regressions",
        ))),
        ..defaults
    }
}

fn sites() -> Vec<Site> {
    let mut settings = Settings::defaults();
    settings.base_url = BASE_URL.into();
    sitemapd::config::Config::new(settings)
        .expect("valid site")
        .sites
}

/// Paths near the page-name grammar, where the parser's edges are.
fn file_name() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "sitemap(-[a-z0-9_.%+-]{0,6})?-[0-9+-]{0,11}\\.xml(\\.gz)?",
        "sitemap_index(-[0-9+]{0,6})?\\.xml(\\.gz)?",
    ]
}

/// Locs an application might write, hostile ones included: XML's special
/// characters, non-ASCII, percent signs, controls, other hosts, long paths.
fn loc() -> impl Strategy<Value = String> {
    let path = prop_oneof![
        "[a-zA-Z0-9/._~&<>\"'%?=#-]{0,40}",
        "\\PC{0,40}",
        any::<String>(),
        "[\\u{4e00}-\\u{9fff}]{600,800}",
    ];
    let origin = prop_oneof![
        4 => Just(BASE_URL.to_owned()),
        1 => Just("https://elsewhere.example/".to_owned()),
        1 => Just("HTTPS://WWW.Example.com:443/shop/".to_owned()),
        1 => Just(String::new()),
    ];
    (origin, path).prop_map(|(origin, path)| format!("{origin}{path}"))
}

/// Locs the schema's CHECK lets through (http(s), a host, no whitespace
/// or control characters at most on a row written behind its back): the
/// writer meets these.
fn stored_loc() -> impl Strategy<Value = String> {
    let origin = prop_oneof![
        Just("https://www.example.com/shop/"),
        Just("http://elsewhere.example/"),
        Just("https://[::1]:8080/"),
    ];
    let path = prop_oneof![
        r#"[a-zA-Z0-9/._~&<>"'%?=#\^`{|}\[\]-]{0,40}"#,
        "\\PC{0,40}",
        any::<String>(),
        "[\\u{4e00}-\\u{9fff}]{600,800}",
    ];
    (origin, path).prop_map(|(origin, path)| format!("{origin}{path}"))
}

/// A row as the writer meets it.
fn entry() -> impl Strategy<Value = (String, Option<i64>, Option<usize>, Option<f32>)> {
    (
        stored_loc(),
        proptest::option::of(-100_000_000_000i64..400_000_000_000),
        proptest::option::of(0usize..8),
        proptest::option::of(-0.5f32..1.5),
    )
}

const CHANGEFREQS: [&str; 8] = [
    "always",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "never",
    "sometimes",
];

/// Every `<loc>` of a document, parsed as a crawler parses it; panics if
/// the document is not well-formed.
fn locs_of(document: &[u8]) -> Vec<String> {
    let mut reader = quick_xml::Reader::from_reader(document);
    let mut buf = Vec::new();
    let (mut locs, mut in_loc) = (Vec::new(), false);
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Eof) => return locs,
            Ok(Event::Start(e)) => {
                in_loc = e.local_name().as_ref() == "loc";
                if in_loc {
                    locs.push(String::new());
                }
            }
            Ok(Event::Text(text)) if in_loc => {
                let loc = locs.last_mut().expect("opened");
                loc.push_str(&text.xml10_content());
            }
            Ok(Event::GeneralRef(r)) if in_loc => {
                let name = r.xml10_content();
                let resolved = quick_xml::escape::resolve_predefined_entity(&name)
                    .unwrap_or_else(|| panic!("undeclared entity &{name};"));
                locs.last_mut().expect("opened").push_str(resolved);
            }
            Ok(Event::End(_)) => in_loc = false,
            Ok(_) => {}
            Err(error) => panic!("not well-formed: {error}"),
        }
        buf.clear();
    }
}

/// The loc as the writer serves it: non-ASCII percent-encoded.
fn served(loc: &str) -> String {
    loc.bytes()
        .map(|b| {
            if b.is_ascii() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Whether `xmllint` finds the document valid against sitemaps.org's
/// `sitemap.xsd` (kept in `tests/fixtures/xsd`).
fn xsd_valid(document: &[u8]) -> bool {
    let xsd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/xsd/sitemap.xsd"
    );
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), document).expect("write document");
    std::process::Command::new("xmllint")
        .args(["--noout", "--schema", xsd])
        .arg(file.path())
        .output()
        .expect("xmllint runs (Debian package libxml2-utils)")
        .status
        .success()
}

fn write_file(bytes: &[u8], name: &str) -> (tempfile::TempDir, Input) {
    let dir = tempfile::TempDir::new().expect("temp dir");
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bytes))
        .expect("write input");
    (dir, Input::File(path))
}

/// Every record of a file in `format`, or the read's error as text.
fn read_all(format: Format, bytes: &[u8], name: &str) -> Result<Vec<RawRecord>, String> {
    let (_dir, input) = write_file(bytes, name);
    let mut records = Vec::new();
    read(format, &input, &ReadOptions::default(), &mut |_, parsed| {
        if let Ok(record) = parsed {
            records.push(record);
        }
        true
    })
    .map_err(|e| e.to_string())?;
    Ok(records)
}

proptest! {
    #![proptest_config(config(2_000))]

    #[test]
    fn a_file_name_denotes_one_document_or_none(file in file_name()) {
        if let Some((name, encoding)) = PageName::parse(&file) {
            prop_assert_eq!(name.file_name(encoding), file.clone());
            prop_assert!(name.page >= 1);
        }
        if let Some((index, encoding)) = IndexFile::parse(&file) {
            prop_assert_eq!(index.file_name(encoding), file.clone());
        }
    }

    #[test]
    fn an_accepted_loc_is_normal_under_its_site_and_servable(loc in loc()) {
        let sites = sites();
        let now = OffsetDateTime::now_utc();
        let validator = Validator::new(&sites, "default", "", now);
        let raw = RawRecord { loc: Some(loc), ..RawRecord::default() };
        if let Ok(record) = validator.validate(&raw) {
            prop_assert!(record.loc.starts_with(BASE_URL), "{}", record.loc);
            prop_assert!(served(&record.loc).chars().count() <= MAX_LOC_CHARS);
            let again = validator
                .validate(&RawRecord { loc: Some(record.loc.clone()), ..RawRecord::default() })
                .expect("a normalised loc is valid");
            prop_assert_eq!(again.loc, record.loc);
        }
    }
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn the_writer_makes_well_formed_pages_within_their_limits(
        rows in proptest::collection::vec(entry(), 0..60),
        max_urls in 1u32..80,
        room in 0u64..40_000,
    ) {
        let max_bytes = sitemapd::sitemap::MIN_MAX_BYTES + room;
        let mut out = Vec::new();
        let mut writer = UrlsetWriter::start(&mut out, max_urls, max_bytes);
        let mut written = Vec::new();
        for (loc, lastmod, changefreq, priority) in &rows {
            let entry = UrlEntry {
                loc,
                lastmod: lastmod.and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok()),
                changefreq: changefreq.map(|i| CHANGEFREQS[i]),
                priority: *priority,
                ..Default::default()
            };
            match writer.push(&mut out, &entry) {
                Ok(None) => written.push(served(loc)),
                Ok(Some(_)) => {}
                Err(_) => break,
            }
        }
        let size = writer.finish(&mut out);
        prop_assert_eq!(size, out.len() as u64);
        prop_assert!(out.len() as u64 <= max_bytes);
        prop_assert!(written.len() <= max_urls as usize);
        let locs = locs_of(&out);
        for loc in &locs {
            prop_assert!(loc.chars().count() <= MAX_LOC_CHARS, "a {}-character loc", loc.chars().count());
        }
        prop_assert_eq!(&locs, &written);
        // A page with no URL is never served (the index lists none), and
        // the XSD requires one.
        prop_assert!(locs.is_empty() || xsd_valid(&out), "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn the_import_readers_survive_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        for (format, name) in [
            (Format::Jsonl, "in.jsonl"),
            (Format::Csv, "in.csv"),
            (Format::Sitemap, "in.xml"),
        ] {
            // Records or an error naming what is wrong; never a panic.
            let _ = read_all(format, &bytes, name);
        }
    }

    #[test]
    fn each_format_reads_back_what_was_written(
        locs in proptest::collection::vec("([a-z0-9/._~&<>\"'?=,-]|%[0-9A-F]{2}){1,30}", 1..20),
    ) {
        let locs: Vec<String> = locs.iter().map(|path| format!("{BASE_URL}{path}")).collect();
        let jsonl: String = locs
            .iter()
            .map(|loc| format!("{}\n", serde_json::json!({ "loc": loc })))
            .collect();
        let mut csv = csv::Writer::from_writer(Vec::new());
        csv.write_record(["loc"]).expect("header");
        for loc in &locs {
            csv.write_record([loc]).expect("row");
        }
        let csv = csv.into_inner().expect("csv");
        let mut xml = Vec::new();
        let mut writer = UrlsetWriter::start(&mut xml, 50_000, 52_428_800);
        for loc in &locs {
            let entry = UrlEntry { loc, lastmod: None, changefreq: None, priority: None, ..Default::default() };
            prop_assert_eq!(writer.push(&mut xml, &entry), Ok(None));
        }
        writer.finish(&mut xml);
        for (format, bytes, name) in [
            (Format::Jsonl, jsonl.into_bytes(), "in.jsonl"),
            (Format::Csv, csv, "in.csv"),
            (Format::Sitemap, xml, "in.xml"),
        ] {
            let read: Vec<String> = read_all(format, &bytes, name)
                .expect("readable")
                .into_iter()
                .map(|r| r.loc.expect("a loc"))
                .collect();
            prop_assert_eq!(&read, &locs, "{}", name);
        }
    }
}
