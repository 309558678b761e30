//! The bulk commands as a newcomer meets them: formats told by the file's
//! name, exports with extra fields, progress on a terminal and in a log,
//! no slow-statement noise, and what to do when PostgreSQL is down.

use std::process::{Command, Output, Stdio};

use sitemapd::ingest::formats::{Format, Input};
use sitemapd::ingest::import::{ImportError, ImportOptions, import};
use sqlx::PgPool;
use tempfile::TempDir;

use crate::helpers::{BASE_URL, TestApp, binary, until_a_statement_waits_on_a_lock};
use crate::import::{jsonl, options, run, write, write_gz};

/// Runs the command to its end, off the async runtime.
async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .expect("ran")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn row_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM sitemap_urls")
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

#[sqlx::test]
async fn import_tells_the_format_by_the_file_name(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let sitemap = format!(
        "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
         <url><loc>{BASE_URL}from-xml</loc></url></urlset>"
    );
    let files = [
        write(&dir, "urls.jsonl", &jsonl(&["from-jsonl"])),
        write_gz(&dir, "URLS.NDJSON.GZ", &jsonl(&["from-ndjson"])),
        write(&dir, "urls.csv", &format!("loc\n{BASE_URL}from-csv\n")),
        write_gz(&dir, "sitemap.xml.gz", &sitemap),
    ];
    let inferred = ImportOptions {
        format: None,
        ..options(Format::Jsonl)
    };
    for file in &files {
        let report = run(&app, file, &inferred).await;
        assert_eq!((report.read, report.invalid), (1, 0), "{file:?}");
    }
    assert_eq!(
        app.table_locs().await,
        ["from-csv", "from-jsonl", "from-ndjson", "from-xml"].map(|l| format!("{BASE_URL}{l}"))
    );

    let odd = write(&dir, "export.txt", &jsonl(&["odd"]));
    let refused = import(
        &app.state.store,
        &app.sites().await,
        Input::File(odd.clone()),
        &inferred,
        |_| {},
    )
    .await
    .expect_err("no format to tell");
    assert!(matches!(refused, ImportError::FormatNeeded { .. }));
    assert!(
        refused.to_string().contains("export.txt: pass --format"),
        "{refused}"
    );

    let mut from_stdin = binary(&app.pool);
    from_stdin.args(["import", "-"]).stdin(Stdio::null());
    let from_stdin = output(from_stdin).await;
    assert_eq!(from_stdin.status.code(), Some(2));
    assert!(
        stderr(&from_stdin).contains("standard input: pass --format (jsonl, csv or sitemap)"),
        "{}",
        stderr(&from_stdin)
    );
    let mut named = binary(&app.pool);
    named.args(["import", odd.to_str().expect("path"), "--format", "jsonl"]);
    assert_eq!(output(named).await.status.code(), Some(0), "--format wins");
}

#[sqlx::test]
async fn unknown_fields_are_refused_with_a_hint_or_ignored_and_counted(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let export = write(
        &dir,
        "export.jsonl",
        &format!(
            "{{\"loc\": \"{BASE_URL}a\", \"title\": \"A\", \"price\": 3}}\n\
             {{\"loc\": \"{BASE_URL}b\", \"title\": \"B\"}}\n\
             {{\"loc\": \"{BASE_URL}c\", \"lastmod\": \"2026-11-01\"}}\n"
        ),
    );
    let csv = write(
        &dir,
        "export.csv",
        &format!("loc,title,lastmod\n{BASE_URL}d,D,2026-11-02\n{BASE_URL}e,,\n"),
    );

    let mut strict = binary(&app.pool);
    strict.args(["import", export.to_str().expect("path")]);
    let strict = output(strict).await;
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    let message = stderr(&strict);
    assert!(message.contains("line 1: record"), "{message}");
    assert!(message.contains("unknown field `title`"), "{message}");
    assert!(message.contains("--ignore-unknown-fields"), "{message}");
    assert!(!message.contains("line 3"), "line 3 is clean: {message}");
    let mut strict_csv = binary(&app.pool);
    strict_csv.args(["import", csv.to_str().expect("path")]);
    let strict_csv = output(strict_csv).await;
    assert_eq!(strict_csv.status.code(), Some(2));
    let message = stderr(&strict_csv);
    assert!(
        message.contains("export.csv: unknown column \"title\"")
            && message.contains("--ignore-unknown-fields"),
        "{message}"
    );
    assert_eq!(row_count(&app).await, 0, "nothing written");

    let lenient = ImportOptions {
        format: None,
        ignore_unknown_fields: true,
        ..options(Format::Jsonl)
    };
    let report = run(&app, &export, &lenient).await;
    assert_eq!((report.read, report.invalid), (3, 0));
    let ignored: Vec<(&str, u64)> = report
        .ignored
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(ignored, [("price", 1), ("title", 2)]);
    let report = run(&app, &csv, &lenient).await;
    assert_eq!((report.read, report.invalid), (2, 0));
    let ignored: Vec<(&str, u64)> = report
        .ignored
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(ignored, [("title", 1)], "an empty cell holds no value");
    assert_eq!(
        app.table_locs().await,
        ["a", "b", "c", "d", "e"].map(|l| format!("{BASE_URL}{l}"))
    );
    let lastmods: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT to_char(lastmod AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM sitemap_urls ORDER BY loc",
    )
    .fetch_all(&app.pool)
    .await
    .expect("lastmods");
    assert_eq!(
        lastmods,
        [
            None,
            None,
            Some("2026-11-01".into()),
            Some("2026-11-02".into()),
            None
        ],
        "the known fields beside ignored ones are kept"
    );

    let mut reported = binary(&app.pool);
    reported.args([
        "import",
        export.to_str().expect("path"),
        "--ignore-unknown-fields",
    ]);
    let reported = output(reported).await;
    assert_eq!(reported.status.code(), Some(0));
    assert!(
        stderr(&reported).contains("ignored unknown fields: price (1), title (2)"),
        "{}",
        stderr(&reported)
    );
}

/// Holds a lock every insert into `sitemap_urls` waits on, until the
/// command has waited on it for longer than sqlx's slow-statement threshold
/// (1 s); then lets it finish.
async fn run_behind_a_lock(app: &TestApp, command: Command) -> Output {
    let mut holder = app.pool.begin().await.expect("transaction");
    sqlx::query("LOCK TABLE sitemap_urls IN SHARE MODE")
        .execute(&mut *holder)
        .await
        .expect("lock");
    let running = tokio::spawn(output(command));
    until_a_statement_waits_on_a_lock(&app.pool, "sitemap_urls").await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    holder.rollback().await.expect("release");
    running.await.expect("ran")
}

#[sqlx::test]
async fn bulk_commands_log_no_slow_statements_and_count_their_progress(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let locs: Vec<String> = (0..100_000).map(|i| format!("bulk/{i}")).collect();
    let file = write(&dir, "bulk.jsonl", &jsonl(&locs));

    let mut importing = binary(&app.pool);
    importing.args(["import", file.to_str().expect("path")]);
    let imported = run_behind_a_lock(&app, importing).await;
    let log = stderr(&imported);
    assert!(imported.status.success(), "{log}");
    assert!(!log.contains("slow statement"), "{log}");
    assert!(
        log.contains("100000 records read (100% of the file)"),
        "a count line, not a bar, off a terminal: {log}"
    );

    let mut seeding = binary(&app.pool);
    seeding.args(["demo", "--urls", "1000"]);
    let seeded = run_behind_a_lock(&app, seeding).await;
    let log = stderr(&seeded);
    assert!(seeded.status.success(), "{log}");
    assert!(!log.contains("slow statement"), "{log}");
    assert!(log.contains("1000 of 1000 rows written"), "{log}");
    assert_eq!(row_count(&app).await, 101_000);
}

#[sqlx::test]
async fn on_a_terminal_demo_and_import_draw_a_bar_with_rate_and_time_left(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let dir = TempDir::new().expect("dir");
    let file = write(&dir, "tty.jsonl", &jsonl(&["tty/1", "tty/2"]));
    for args in [
        vec!["demo", "--urls", "500"],
        vec!["import", file.to_str().expect("path")],
    ] {
        // script(1) gives the command a pseudo-terminal and copies what it
        // draws to standard output.
        let mut line = String::from(env!("CARGO_BIN_EXE_sitemapd"));
        for arg in &args {
            line.push(' ');
            line.push_str(arg);
        }
        let environment = binary(&app.pool);
        let mut on_terminal = Command::new("script");
        on_terminal
            .args(["-qec", &line, "/dev/null"])
            .envs(environment.get_envs().filter_map(|(k, v)| Some((k, v?))));
        let drawn = output(on_terminal).await;
        let screen = String::from_utf8_lossy(&drawn.stdout);
        assert!(drawn.status.success(), "{args:?}: {screen}");
        if args[0] == "demo" {
            assert!(screen.contains("500/500 rows"), "{screen}");
        } else {
            assert!(screen.contains("2 records"), "{screen}");
        }
        assert!(
            screen.contains("left)"),
            "the bar shows the time left: {screen}"
        );
        assert!(screen.contains("/s"), "the bar shows the rate: {screen}");
    }
}

#[test]
fn serve_without_postgres_says_how_to_get_one() {
    // Nothing listens on port 1; a freed ephemeral port may be another
    // test's by the time it is dialled.
    let closed = "127.0.0.1:1";
    let output = Command::new(env!("CARGO_BIN_EXE_sitemapd"))
        .arg("serve")
        .env(
            "DATABASE_URL",
            format!("postgres://postgres@{closed}/sitemapd"),
        )
        .env("SITEMAPD_BASE_URL", BASE_URL)
        .env("SITEMAPD_LISTEN", "127.0.0.1:0")
        .env("SITEMAPD_METRICS_LISTEN", "127.0.0.1:0")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains(&format!(
            "connecting to postgres://postgres@{closed}/sitemapd"
        )),
        "{message}"
    );
    assert!(message.contains("Is PostgreSQL running"), "{message}");
    assert!(
        message.contains("docker compose up -d postgres"),
        "{message}"
    );
    assert!(message.contains("set DATABASE_URL"), "{message}");
}

#[sqlx::test]
async fn migrate_creates_the_database_when_it_is_missing(pool: PgPool) {
    // Named after the end of the test's own database name, which is
    // unique and already at PostgreSQL's 63-byte limit.
    let options = pool.connect_options();
    let test_database = options.get_database().expect("a database");
    let missing = format!(
        "sitemapd_created_{}",
        &test_database[test_database.len().saturating_sub(16)..]
    );
    let url = crate::helpers::database_url(&pool);
    let url = format!("{}/{missing}", &url[..url.rfind('/').expect("a path")]);
    let mut command = binary(&pool);
    command
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .env("RUST_LOG", "info");
    let migrated = output(command).await;
    assert!(migrated.status.success(), "{}", stderr(&migrated));

    let created = sqlx::PgPool::connect(&url).await.expect("the new database");
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_tables WHERE tablename IN ('sitemap_urls', 'sitemap_pages')",
    )
    .fetch_one(&created)
    .await
    .expect("tables");
    created.close().await;
    crate::helpers::exec(&pool, &format!("DROP DATABASE \"{missing}\" WITH (FORCE)")).await;
    assert_eq!(tables, 2);
    assert!(
        stderr(&migrated).contains("creating database"),
        "{}",
        stderr(&migrated)
    );
}

#[sqlx::test]
async fn fold_places_a_bulk_load_before_the_service_starts(pool: PgPool) {
    crate::helpers::exec(
        &pool,
        &format!(
            "INSERT INTO sitemap_urls (section, loc)
             SELECT CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END, '{BASE_URL}bulk/' || g
             FROM generate_series(1, 25000) g"
        ),
    )
    .await;
    let mut command = binary(&pool);
    command
        .arg("fold")
        .env("SITEMAPD_FOLD_BATCH_ROWS", "10000")
        .env("SITEMAPD_MAX_URLS", "5000");
    let folded = output(command).await;
    assert!(folded.status.success(), "{}", stderr(&folded));
    let printed = String::from_utf8_lossy(&folded.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    let counts: Vec<&str> = lines
        .iter()
        .filter_map(|line| line.strip_prefix("folded "))
        .map(|rest| rest.split(' ').next().expect("a count"))
        .collect();
    assert_eq!(counts, ["10000", "10000", "5000"], "{printed}");
    assert!(
        lines
            .last()
            .is_some_and(|line| line.starts_with("wrote 25000 feed entries in ")),
        "folds of 10,000 rows keep their entries, written out at the end: {printed}"
    );

    let pages: Vec<(String, i32, i32)> =
        sqlx::query_as("SELECT section, page, url_count FROM sitemap_pages ORDER BY section, page")
            .fetch_all(&pool)
            .await
            .expect("pages");
    let expected: Vec<(String, i32, i32)> = ["even", "odd"]
        .into_iter()
        .flat_map(|section| {
            [(1, 5000), (2, 5000), (3, 2500)].map(|(p, n)| (section.to_owned(), p, n))
        })
        .collect();
    assert_eq!(pages, expected);
    let added: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT loc) FROM sitemap_changes WHERE change = 'added'",
    )
    .fetch_one(&pool)
    .await
    .expect("feed");
    assert_eq!(added, 25_000);
}

/// The binary run with `argument` alone, needing no database; it succeeds.
fn run_alone(argument: &str) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_sitemapd"))
        .arg(argument)
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let output = run_alone("--version");
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git runs");
    let head = String::from_utf8(head.stdout).expect("UTF-8");
    assert_eq!(
        printed.trim(),
        format!("sitemapd {} ({})", env!("CARGO_PKG_VERSION"), head.trim()),
    );
}

#[test]
fn token_ends_every_line_it_prints() {
    let output = run_alone("token");
    let printed = String::from_utf8(output.stdout.clone()).expect("UTF-8");
    let lines: Vec<&str> = printed.split_inclusive('\n').collect();
    assert_eq!(lines.len(), 2, "{printed:?}");
    assert!(lines[0].starts_with("token: smd_") && lines[0].ends_with('\n'));
    assert!(lines[1].starts_with("hash:  sha256:") && lines[1].ends_with('\n'));
    let hint = stderr(&output);
    assert!(
        hint.starts_with("Add the hash to api_token_hashes") && hint.ends_with(".\n"),
        "{hint:?}"
    );
}
