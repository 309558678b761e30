//! The XML writer's throughput on a full page: URLs/s and MB/s, with gzip of
//! the same bytes beside it for scale (the writer should be a small part of
//! a page's cost). `cargo bench --bench writer`.

use std::hint::black_box;
use std::io::Write;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use flate2::Compression;
use flate2::write::GzEncoder;
use sitemapd::sitemap::{PROTOCOL_MAX_BYTES, PROTOCOL_MAX_URLS, UrlEntry, UrlsetWriter};
use time::OffsetDateTime;

const WORDS: [&str; 8] = [
    "alpine", "harbor", "copper", "meadow", "lantern", "orbit", "willow", "granite",
];

/// Rows shaped like a shop's: plain ASCII paths, some query strings with `&`,
/// a few non-ASCII slugs; lastmod on all, changefreq and priority on some.
fn rows(n: usize) -> Vec<(String, OffsetDateTime, Option<&'static str>, Option<f32>)> {
    let base = OffsetDateTime::from_unix_timestamp(1_760_000_000).expect("valid");
    (0..n)
        .map(|i| {
            let word = WORDS[i % WORDS.len()];
            let loc = match i % 10 {
                0 => format!("https://www.example.com/search?q={word}&page={i}"),
                1 => format!("https://www.example.com/caf\u{e9}-{word}/{i}"),
                _ => format!(
                    "https://www.example.com/products/category-{}/{word}-item-{i}",
                    i % 50
                ),
            };
            let lastmod = base - time::Duration::seconds(i as i64 * 37);
            let changefreq = (i % 3 == 0).then_some("weekly");
            let priority = (i % 4 == 0).then_some(0.5);
            (loc, lastmod, changefreq, priority)
        })
        .collect()
}

fn write_page(
    rows: &[(String, OffsetDateTime, Option<&'static str>, Option<f32>)],
    out: &mut Vec<u8>,
) {
    out.clear();
    let mut writer = UrlsetWriter::start(out, PROTOCOL_MAX_URLS, PROTOCOL_MAX_BYTES);
    for (loc, lastmod, changefreq, priority) in rows {
        let entry = UrlEntry {
            loc,
            lastmod: Some(*lastmod),
            changefreq: *changefreq,
            priority: *priority,
            ..Default::default()
        };
        let _ = writer.push(out, &entry).expect("within limits");
    }
    writer.finish(out);
}

fn bench(c: &mut Criterion) {
    let rows = rows(PROTOCOL_MAX_URLS as usize);
    let mut xml = Vec::new();
    write_page(&rows, &mut xml);

    let mut group = c.benchmark_group("page_of_50000");
    group.sample_size(20);
    group.throughput(Throughput::Elements(rows.len() as u64));
    group.bench_function("write_xml/urls", |b| {
        let mut out = Vec::with_capacity(xml.len());
        b.iter(|| write_page(black_box(&rows), &mut out));
    });
    group.throughput(Throughput::Bytes(xml.len() as u64));
    group.bench_function("write_xml/bytes", |b| {
        let mut out = Vec::with_capacity(xml.len());
        b.iter(|| write_page(black_box(&rows), &mut out));
    });
    for level in [1, 6] {
        group.bench_with_input(
            BenchmarkId::new("gzip_same_bytes", level),
            &level,
            |b, &level| {
                b.iter(|| {
                    let mut gz =
                        GzEncoder::new(Vec::with_capacity(xml.len() / 4), Compression::new(level));
                    gz.write_all(black_box(&xml)).expect("in memory");
                    gz.finish().expect("in memory")
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
