//! `sitemapd import`: every format, all or nothing, replace and dry run,
//! concurrent importers, and an import killed half-way.

use std::io::Write;
use std::process::Stdio;

use flate2::Compression;
use flate2::write::GzEncoder;
use sitemapd::ingest::formats::{Format, Input};
use sitemapd::ingest::import::{ImportOptions, ImportReport, import};
use sitemapd::ingest::rule::Rule;
use sqlx::PgPool;
use tempfile::TempDir;

use crate::helpers::{BASE_URL, TestApp, binary, exec, until_a_statement_waits_on_a_lock};

pub(crate) fn options(format: Format) -> ImportOptions {
    ImportOptions {
        format: Some(format),
        ignore_unknown_fields: false,
        site: None,
        section: None,
        dry_run: false,
        replace: false,
        skip_invalid: false,
        max_reported: 100,
    }
}

/// Imports `file`, then folds, as the service's next round would.
pub(crate) async fn run(
    app: &TestApp,
    file: &std::path::Path,
    options: &ImportOptions,
) -> ImportReport {
    let report = import(
        &app.state.store,
        &app.sites().await,
        Input::File(file.to_owned()),
        options,
        |_| {},
    )
    .await
    .expect("import runs");
    app.fold().await;
    report
}

pub(crate) fn write(dir: &TempDir, name: &str, content: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).expect("write input");
    path
}

pub(crate) fn write_gz(dir: &TempDir, name: &str, content: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(content.as_bytes()).expect("gzip");
    std::fs::write(&path, gz.finish().expect("gzip")).expect("write input");
    path
}

pub(crate) fn jsonl<S: AsRef<str>>(locs: &[S]) -> String {
    locs.iter()
        .map(|l| format!("{{\"loc\": \"{BASE_URL}{}\"}}\n", l.as_ref()))
        .collect()
}

#[sqlx::test]
async fn json_lines_and_csv_are_imported_and_served(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let lines = format!(
        "{{\"loc\": \"{BASE_URL}a\", \"lastmod\": \"2026-03-04T05:06:07+02:00\", \"priority\": 0.7}}\n\n\
         {{\"loc\": \"{BASE_URL}b\", \"changefreq\": \"Daily\", \"section\": \"news\"}}\n"
    );
    let report = run(
        &app,
        &write(&dir, "in.jsonl", &lines),
        &options(Format::Jsonl),
    )
    .await;
    assert_eq!(
        (
            report.read,
            report.invalid,
            report.counts.inserted,
            report.written
        ),
        (2, 0, 2, true)
    );

    let csv = format!(
        "section,loc,priority,lastmod\nblog,{BASE_URL}c,0.1,2025\n,\"{BASE_URL}d?x=1,2\",,\n"
    );
    let report = run(&app, &write(&dir, "in.csv", &csv), &options(Format::Csv)).await;
    assert_eq!((report.read, report.counts.inserted), (2, 2));

    let mut served = app.served_locs().await;
    served.sort();
    let expected: Vec<String> = ["a", "b", "c", "d?x=1,2"]
        .iter()
        .map(|l| format!("{BASE_URL}{l}"))
        .collect();
    assert_eq!(served, expected);
    let a = app.page("/sitemap-1.xml.gz").await.urls;
    assert_eq!(a[0].lastmod.as_deref(), Some("2026-03-04T03:06:07+00:00"));
    assert_eq!(a[0].priority.as_deref(), Some("0.7"));
}

#[sqlx::test]
async fn sitemap_files_and_an_index_of_gzipped_children_are_imported(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let urlset = |locs: &[&str]| {
        let urls: String = locs
            .iter()
            .map(|l| format!("<url><loc>{BASE_URL}{l}</loc><lastmod>2026-01-02</lastmod></url>\n"))
            .collect();
        format!(
            "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n{urls}</urlset>\n"
        )
    };
    write_gz(&dir, "part-1.xml.gz", &urlset(&["one?a=1&amp;b=2", "two"]));
    write(&dir, "part-2.xml", &urlset(&["three", "caf&#233;"]));
    let index = write(
        &dir,
        "index.xml",
        "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
         <sitemap><loc>https://old-host.example/sitemaps/part-1.xml.gz</loc></sitemap>\
         <sitemap><loc>https://old-host.example/sitemaps/part-2.xml</loc><lastmod>2026-01-01</lastmod></sitemap>\
         </sitemapindex>",
    );
    let report = run(&app, &index, &options(Format::Sitemap)).await;
    assert_eq!(
        (report.read, report.invalid, report.counts.inserted),
        (4, 0, 4),
        "{report:?}"
    );
    let served = app.served_locs().await;
    assert!(
        served.contains(&format!("{BASE_URL}one?a=1&b=2")),
        "{served:?}"
    );
    assert!(
        served.contains(&format!("{BASE_URL}caf%C3%A9")),
        "{served:?}"
    );

    let single = write_gz(&dir, "single.xml.gz", &urlset(&["four"]));
    assert_eq!(
        run(&app, &single, &options(Format::Sitemap))
            .await
            .counts
            .inserted,
        1
    );
}

#[sqlx::test]
async fn one_invalid_record_writes_nothing_unless_skip_invalid(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "mixed.jsonl",
        &format!(
            "{}{{\"loc\": \"https://elsewhere.example/x\"}}\nnot json\n{{\"loc\": \"{BASE_URL}z\", \"priority\": 3}}\n",
            jsonl(&["ok-1", "ok-2"])
        ),
    );
    let report = run(&app, &file, &options(Format::Jsonl)).await;
    assert_eq!((report.read, report.invalid, report.written), (5, 3, false));
    let positions: Vec<String> = report
        .rejected
        .iter()
        .map(|r| r.position.to_string())
        .collect();
    assert_eq!(positions, ["line 3", "line 4", "line 5"]);
    assert_eq!(report.rejected[0].errors[0].field, "loc");
    assert!(matches!(
        report.rejected[0].errors[0].rule,
        Rule::UnderBaseUrl { .. }
    ));
    assert_eq!(report.rejected[2].errors[0].field, "priority");
    assert!(app.table_locs().await.is_empty(), "all or nothing");

    let capped = run(
        &app,
        &file,
        &ImportOptions {
            max_reported: 1,
            ..options(Format::Jsonl)
        },
    )
    .await;
    assert_eq!((capped.invalid, capped.rejected.len()), (3, 1));

    let report = run(
        &app,
        &file,
        &ImportOptions {
            skip_invalid: true,
            ..options(Format::Jsonl)
        },
    )
    .await;
    assert_eq!(
        (report.invalid, report.counts.inserted, report.written),
        (3, 2, true)
    );
    assert_eq!(
        app.table_locs().await,
        [format!("{BASE_URL}ok-1"), format!("{BASE_URL}ok-2")]
    );
}

#[sqlx::test]
async fn dry_run_reports_and_writes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "ok-", 1).await;
    let dir = TempDir::new().expect("dir");
    let file = write(&dir, "in.jsonl", &jsonl(&["ok-1", "new"]));
    let report = run(
        &app,
        &file,
        &ImportOptions {
            dry_run: true,
            ..options(Format::Jsonl)
        },
    )
    .await;
    assert_eq!(
        (
            report.counts.inserted,
            report.counts.unchanged,
            report.written
        ),
        (1, 1, false)
    );
    assert_eq!(app.table_locs().await, [format!("{BASE_URL}ok-1")]);
}

#[sqlx::test]
async fn replace_makes_the_section_hold_exactly_the_file(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("blog", "old-", 3).await;
    app.insert_urls("", "home-", 2).await;
    let dir = TempDir::new().expect("dir");
    let file = write(&dir, "blog.jsonl", &jsonl(&["old-2", "fresh"]));
    let replace = ImportOptions {
        replace: true,
        section: Some("blog".into()),
        ..options(Format::Jsonl)
    };
    let report = run(&app, &file, &replace).await;
    assert_eq!((report.counts.inserted, report.counts.deleted), (1, 2));
    let blog: Vec<String> =
        sqlx::query_scalar("SELECT loc FROM sitemap_urls WHERE section = 'blog' ORDER BY loc")
            .fetch_all(&app.pool)
            .await
            .expect("blog");
    assert_eq!(
        blog,
        [format!("{BASE_URL}fresh"), format!("{BASE_URL}old-2")]
    );
    assert_eq!(
        app.table_locs().await.len(),
        4,
        "the default section is untouched"
    );
}

#[sqlx::test]
async fn importing_the_same_file_again_changes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "in.jsonl",
        &format!(
            "{{\"loc\": \"{BASE_URL}x\", \"lastmod\": \"2026-01-01\", \"changefreq\": \"weekly\"}}\n"
        ),
    );
    run(&app, &file, &options(Format::Jsonl)).await;
    let index = app.index().await;
    let again = run(&app, &file, &options(Format::Jsonl)).await;
    assert_eq!(
        (
            again.counts.inserted,
            again.counts.updated,
            again.counts.unchanged
        ),
        (0, 0, 1)
    );
    assert_eq!(app.index().await, index, "no lastmod moved");
}

#[sqlx::test]
async fn concurrent_importers_of_one_section_lose_and_duplicate_nothing(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 500).await;
    let dir = TempDir::new().expect("dir");
    // Overlapping files: 0..3000 and 2000..5000.
    let first: Vec<String> = (0..3000).map(|i| format!("p/{i}")).collect();
    let second: Vec<String> = (2000..5000).map(|i| format!("p/{i}")).collect();
    let a = write(&dir, "a.jsonl", &jsonl(&first));
    let b = write(&dir, "b.jsonl", &jsonl(&second));
    let opts = options(Format::Jsonl);
    let (ra, rb) = tokio::join!(run(&app, &a, &opts), run(&app, &b, &opts));
    assert!(ra.written && rb.written);
    assert_eq!(ra.counts.inserted + rb.counts.inserted, 5000);
    let served = app.served_locs().await;
    assert_eq!(served.len(), 5000);
    assert_eq!(served, app.table_locs().await);
}

#[sqlx::test]
async fn a_loc_written_elsewhere_meanwhile_is_updated_not_duplicated(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let locs: Vec<String> = (0..100).map(|i| format!("m/{i}")).collect();
    let file = write(&dir, "m.jsonl", &jsonl(&locs));
    // Another writer adds one of the file's locs, in another section, and
    // commits only once the import is under way: the import's insert then
    // meets it.
    let mut other = app.pool.begin().await.expect("transaction");
    sqlx::query("INSERT INTO sitemap_urls (section, loc) VALUES ('elsewhere', $1)")
        .bind(format!("{BASE_URL}m/50"))
        .execute(&mut *other)
        .await
        .expect("insert");
    let importing = {
        let store = app.state.store.clone();
        let sites = app.sites().await;
        let opts = options(Format::Jsonl);
        tokio::spawn(async move {
            import(&store, &sites, Input::File(file), &opts, |_| {})
                .await
                .expect("import runs")
        })
    };
    until_a_statement_waits_on_a_lock(&app.pool, "sitemap_urls").await;
    other.commit().await.expect("commit");
    let report = importing.await.expect("joined");
    app.fold().await;
    assert!(report.written);
    assert_eq!(
        (report.counts.inserted, report.counts.updated),
        (99, 1),
        "{report:?}"
    );
    let sections: Vec<String> = sqlx::query_scalar("SELECT DISTINCT section FROM sitemap_urls")
        .fetch_all(&app.pool)
        .await
        .expect("sections");
    assert_eq!(sections, [""], "the file's record won");
    assert_eq!(app.served_locs().await.len(), 100);
}

#[sqlx::test]
async fn the_command_exits_0_1_or_2(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let good = write(&dir, "good.jsonl", &jsonl(&["a"]));
    let bad = write(&dir, "bad.jsonl", "{\"loc\": \"ftp://x\"}\n");
    let pool = app.pool.clone();
    let statuses = tokio::task::spawn_blocking(move || {
        let status = |args: &[&str]| {
            let output = binary(&pool)
                .arg("import")
                .args(args)
                .output()
                .expect("runs");
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        };
        [
            status(&[good.to_str().expect("path"), "--format", "jsonl"]),
            status(&[bad.to_str().expect("path"), "--format", "jsonl"]),
            status(&["/nonexistent/file.jsonl", "--format", "jsonl"]),
            status(&[good.to_str().expect("path"), "--format", "yaml"]),
        ]
    })
    .await
    .expect("ran");
    assert_eq!(statuses[0].0, Some(0), "{}", statuses[0].1);
    assert_eq!(statuses[1].0, Some(1), "{}", statuses[1].1);
    assert!(
        statuses[1].1.contains("line 1: loc \"ftp://x\""),
        "{}",
        statuses[1].1
    );
    assert_eq!(statuses[2].0, Some(2), "{}", statuses[2].1);
    assert!(
        statuses[2].1.contains("/nonexistent/file.jsonl"),
        "{}",
        statuses[2].1
    );
    assert_eq!(statuses[3].0, Some(2), "{}", statuses[3].1);
}

#[sqlx::test]
async fn an_import_killed_half_way_leaves_the_table_as_it_was(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "before-", 3).await;
    let before = app.table_locs().await;
    let pool = app.pool.clone();
    // Another writer holds, uncommitted, the file's last loc: the import
    // copies its rows, then its insert waits on that key, its transaction
    // open.
    let mut holder = app.pool.begin().await.expect("transaction");
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
        .bind(format!("{BASE_URL}half/49999"))
        .execute(&mut *holder)
        .await
        .expect("hold a key");
    let mut child = binary(&pool)
        .args(["import", "-", "--format", "jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let lines = jsonl(&(0..50_000).map(|i| format!("half/{i}")).collect::<Vec<_>>());
    tokio::task::spawn_blocking(move || stdin.write_all(lines.as_bytes()).expect("feed"));
    until_a_statement_waits_on_a_lock(&app.pool, "sitemap_urls").await;
    child.kill().expect("kill");
    let _ = child.wait();
    holder.rollback().await.expect("release");
    app.fold().await;
    // Whatever the killed import wrote was never committed.
    assert_eq!(app.table_locs().await, before);
    assert_eq!(app.served_locs().await, before);
}

#[sqlx::test]
async fn imported_rows_fill_the_last_page_then_whole_pages(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 500).await;
    app.insert_urls("", "existing/", 100).await;
    let dir = TempDir::new().expect("dir");
    let locs: Vec<String> = (0..1200).map(|i| format!("imported/{i}")).collect();
    run(
        &app,
        &write(&dir, "in.jsonl", &jsonl(&locs)),
        &options(Format::Jsonl),
    )
    .await;
    let sizes: Vec<usize> = app.crawl().await.iter().map(|(_, l)| l.len()).collect();
    assert_eq!(sizes, [500, 500, 300]);
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

#[sqlx::test]
async fn imported_long_urls_never_overfill_a_page(pool: PgPool) {
    const MAX_BYTES: u64 = 64 * 1024;
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = MAX_BYTES).await;
    let dir = TempDir::new().expect("dir");
    let locs: Vec<String> = (0..200)
        .map(|i| {
            if i % 10 == 0 {
                format!("long/{i}/{}", "x".repeat(1900))
            } else {
                format!("short/{i}")
            }
        })
        .collect();
    run(
        &app,
        &write(&dir, "in.jsonl", &jsonl(&locs)),
        &options(Format::Jsonl),
    )
    .await;
    // crawl() checks every page against max_urls and max_bytes.
    assert!(app.crawl().await.len() > 1);
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

#[sqlx::test]
async fn a_files_last_record_of_a_loc_wins(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "in.jsonl",
        &format!(
            "{{\"loc\": \"{BASE_URL}a\", \"changefreq\": \"daily\"}}\n\
             {{\"loc\": \"{BASE_URL}b\", \"section\": \"first\"}}\n\
             {{\"loc\": \"{BASE_URL}a\", \"changefreq\": \"weekly\"}}\n\
             {{\"loc\": \"{BASE_URL}b\", \"section\": \"second\"}}\n\
             {{\"loc\": \"{BASE_URL}a\", \"changefreq\": \"monthly\"}}\n"
        ),
    );
    let report = run(&app, &file, &options(Format::Jsonl)).await;
    assert_eq!((report.read, report.counts.inserted), (5, 2));
    let rows: Vec<(String, String, Option<String>)> =
        sqlx::query_as("SELECT loc, section, changefreq FROM sitemap_urls ORDER BY loc")
            .fetch_all(&app.pool)
            .await
            .expect("rows");
    assert_eq!(
        rows,
        [
            (
                format!("{BASE_URL}a"),
                String::new(),
                Some("monthly".into())
            ),
            (format!("{BASE_URL}b"), "second".into(), None),
        ]
    );
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

/// A sitemap as older generators write it: every extension, with the
/// elements Google deprecated in 2022.
fn sitemap_with_extensions(published: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:v="http://www.google.com/schemas/sitemap-video/1.1"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"
        xmlns:xhtml="http://www.w3.org/1999/xhtml">
 <url>
  <loc>{BASE_URL}en/grill</loc>
  <xhtml:link rel="alternate" hreflang="en" href="{BASE_URL}en/grill"/>
  <xhtml:link rel="alternate" hreflang="de" href="{BASE_URL}de/grill"/>
  <image:image>
   <image:loc>https://cdn.example.net/a.jpg</image:loc>
   <image:caption>A grill</image:caption>
   <image:title>Grill</image:title>
   <image:geo_location>Berlin</image:geo_location>
   <image:license>https://example.net/license</image:license>
  </image:image>
  <image:image><image:loc>https://cdn.example.net/b.jpg?x=1&amp;y=2</image:loc></image:image>
  <v:video>
   <v:thumbnail_loc>https://cdn.example.net/t.jpg</v:thumbnail_loc>
   <v:title>Grilling steaks</v:title>
   <v:description>Steaks &amp; more</v:description>
   <v:player_loc allow_embed="yes" autoplay="ap=1">https://www.example.com/player?v=1</v:player_loc>
   <v:duration>600</v:duration>
   <v:rating>4.2</v:rating>
   <v:view_count>12345</v:view_count>
   <v:family_friendly>yes</v:family_friendly>
   <v:restriction relationship="allow">IE GB US</v:restriction>
   <v:platform relationship="deny">tv</v:platform>
   <v:requires_subscription>no</v:requires_subscription>
   <v:uploader info="{BASE_URL}users/grilly">Grilly</v:uploader>
   <v:live>no</v:live>
   <v:tag>steak</v:tag>
   <v:tag>summer</v:tag>
   <v:category>Grilling</v:category>
   <v:gallery_loc>https://www.example.com/gallery</v:gallery_loc>
   <v:price currency="EUR">1.99</v:price>
   <v:tvshow><v:show_title>Grill Time</v:show_title></v:tvshow>
  </v:video>
 </url>
 <url>
  <loc>{BASE_URL}de/grill</loc>
  <xhtml:link rel="alternate" hreflang="en" href="{BASE_URL}en/grill"/>
  <xhtml:link rel="alternate" hreflang="de" href="{BASE_URL}de/grill"/>
  <news:news>
   <news:publication><news:name>Grill News</news:name><news:language>de</news:language></news:publication>
   <news:publication_date>{published}</news:publication_date>
   <news:title>Grillen im Winter</news:title>
   <news:keywords>grill, winter</news:keywords>
  </news:news>
 </url>
</urlset>
"#
    )
}

/// [`sitemap_with_extensions`] written as `name`, its article published an
/// hour ago (returned as written), inside the news window.
fn sitemap_published_an_hour_ago(dir: &TempDir, name: &str) -> (String, std::path::PathBuf) {
    let published = (time::OffsetDateTime::now_utc() - time::Duration::hours(1))
        .replace_nanosecond(0)
        .expect("whole seconds")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("formats");
    let file = write(dir, name, &sitemap_with_extensions(&published));
    (published, file)
}

#[sqlx::test]
async fn a_sitemap_keeps_its_extensions_and_drops_what_google_deprecated(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let (published, file) = sitemap_published_an_hour_ago(&dir, "old.xml");
    let report = run(&app, &file, &options(Format::Sitemap)).await;
    assert_eq!((report.read, report.invalid), (2, 0), "{report:?}");
    let dropped: Vec<(&str, u64)> = report
        .dropped
        .iter()
        .map(|(element, count)| (element.as_str(), *count))
        .collect();
    assert_eq!(
        dropped,
        [
            ("image:caption", 1),
            ("image:geo_location", 1),
            ("image:license", 1),
            ("image:title", 1),
            ("news:keywords", 1),
            ("video:category", 1),
            ("video:gallery_loc", 1),
            ("video:player_loc@allow_embed", 1),
            ("video:player_loc@autoplay", 1),
            ("video:price", 1),
            ("video:tvshow", 1),
        ]
    );

    let page = app.page("/sitemap-1.xml.gz").await;
    let by_loc = |path: &str| {
        page.urls
            .iter()
            .find(|u| u.loc == format!("{BASE_URL}{path}"))
            .unwrap_or_else(|| panic!("{path} served"))
    };
    let (en, de) = (by_loc("en/grill"), by_loc("de/grill"));
    let images: Vec<&str> = en.images.iter().map(|i| i.loc.as_str()).collect();
    assert_eq!(
        images,
        [
            "https://cdn.example.net/a.jpg",
            "https://cdn.example.net/b.jpg?x=1&y=2"
        ]
    );
    assert_eq!(en.videos.len(), 1);
    assert_eq!(en.videos[0].title, "Grilling steaks");
    assert_eq!(en.videos[0].tags, ["steak", "summer"]);
    for url in [en, de] {
        let mut links: Vec<(&str, &str)> = url
            .links
            .iter()
            .map(|l| (l.hreflang.as_str(), l.href.as_str()))
            .collect();
        links.sort();
        assert_eq!(
            links,
            [
                ("de", format!("{BASE_URL}de/grill").as_str()),
                ("en", format!("{BASE_URL}en/grill").as_str())
            ],
            "{}",
            url.loc
        );
    }
    let video: serde_json::Value =
        sqlx::query_scalar("SELECT videos -> 0 FROM sitemap_urls WHERE loc LIKE '%/en/grill'")
            .fetch_one(&app.pool)
            .await
            .expect("video");
    assert_eq!(
        video,
        serde_json::json!({
            "thumbnail_loc": "https://cdn.example.net/t.jpg",
            "title": "Grilling steaks",
            "description": "Steaks & more",
            "player_loc": "https://www.example.com/player?v=1",
            "duration": 600,
            "rating": 4.2,
            "view_count": 12345,
            "family_friendly": true,
            "restriction": { "relationship": "allow", "countries": ["IE", "GB", "US"] },
            "platform": { "relationship": "deny", "platforms": ["tv"] },
            "requires_subscription": false,
            "uploader": { "name": "Grilly", "info": format!("{BASE_URL}users/grilly") },
            "live": false,
            "tags": ["steak", "summer"],
        })
    );
    let news = app.page("/sitemap_news.xml.gz").await;
    assert_eq!(news.urls.len(), 1);
    let article = news.urls[0].news.as_ref().expect("news");
    assert_eq!(
        (
            article.publication.name.as_str(),
            article.publication.language.as_str(),
            article.title.as_str(),
            article.publication_date.as_str()
        ),
        ("Grill News", "de", "Grillen im Winter", published.as_str())
    );
}

#[sqlx::test]
async fn a_bad_extension_value_in_a_sitemap_is_rejected_by_position_and_field(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "bad.xml",
        &format!(
            r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:video="http://www.google.com/schemas/sitemap-video/1.1">
<url><loc>{BASE_URL}ok</loc></url>
<url><loc>{BASE_URL}v</loc><video:video>
 <video:thumbnail_loc>https://cdn.example.net/t.jpg</video:thumbnail_loc>
 <video:title>T</video:title><video:description>D</video:description>
 <video:content_loc>https://cdn.example.net/v.mp4</video:content_loc>
 <video:duration>ten minutes</video:duration>
 <video:family_friendly>maybe</video:family_friendly>
</video:video></url>
</urlset>"#
        ),
    );
    let report = run(&app, &file, &options(Format::Sitemap)).await;
    assert_eq!((report.read, report.invalid), (2, 1));
    assert!(!report.written);
    let rejected = &report.rejected[0];
    assert_eq!(rejected.position.to_string(), "bad.xml, <url> 2");
    let fields: Vec<&str> = rejected.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        ["videos[0].duration", "videos[0].family_friendly"],
        "{rejected:?}"
    );
}

/// Every column of the served site's rows, as text, by loc.
async fn rows_as_text(app: &TestApp) -> Vec<Vec<Option<String>>> {
    sqlx::query_scalar::<_, Vec<Option<String>>>(
        "SELECT ARRAY[site, section, loc, lastmod::text, changefreq, priority::text, images::text,
                      videos::text, news::text, hreflang::text, hreflang_cluster]
         FROM sitemap_urls WHERE loc <> $1 ORDER BY loc",
    )
    .bind(format!("{BASE_URL}other"))
    .fetch_all(&app.pool)
    .await
    .expect("rows")
}

#[sqlx::test]
async fn a_first_load_writes_the_rows_an_upsert_would(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let (_, sitemap) = sitemap_published_an_hour_ago(&dir, "ext.xml");
    let lines = format!(
        "{{\"loc\": \"{BASE_URL}a\", \"lastmod\": \"2026-03-04T05:06:07+02:00\", \"priority\": 0.7, \
           \"changefreq\": \"daily\", \"section\": \"news\"}}\n\
         {{\"loc\": \"{BASE_URL}b?q=1&r=%C3%A9\"}}\n{{\"loc\": \"{BASE_URL}a\", \"priority\": 0.2}}\n"
    );
    let lines = write(&dir, "plain.jsonl", &lines);
    for (file, format) in [(sitemap, Format::Sitemap), (lines, Format::Jsonl)] {
        // The table holds no row: the file goes straight into sitemap_urls.
        exec(&app.pool, "DELETE FROM sitemap_urls").await;
        let loaded = run(&app, &file, &options(format)).await;
        assert_eq!(
            (loaded.counts.inserted, loaded.invalid),
            (2, 0),
            "{loaded:?}"
        );
        let first_load = rows_as_text(&app).await;
        assert_eq!(first_load.len(), 2);

        // With a row present, it is staged and upserted: the same rows.
        exec(&app.pool, "DELETE FROM sitemap_urls").await;
        exec(
            &app.pool,
            &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}other')"),
        )
        .await;
        let upserted = run(&app, &file, &options(format)).await;
        assert_eq!(upserted.counts, loaded.counts);
        assert_eq!(rows_as_text(&app).await, first_load);
    }
}
