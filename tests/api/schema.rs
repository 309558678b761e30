//! The data contract: what the schema admits, and the bookkeeping it keeps.

use sitemapd::ingest::rule::Rule;
use sitemapd::sitemap::CHANGEFREQS;
use sitemapd::sitemap::name::is_section_slug;
use sitemapd::sitemap::writer::entry_bytes;
use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp};

#[sqlx::test]
async fn the_schema_and_the_writer_agree_on_entry_sizes(pool: PgPool) {
    let long_multibyte = format!("https://e.com/{}", "\u{1F600}".repeat(2000));
    for loc in [
        "https://e.com/",
        "https://e.com/a&b<c>d\"e'f",
        "https://e.com/caf\u{e9}/\u{65e5}\u{672c}?q=\u{1F600}&x=%20",
        "https://e.com/&&&&''''\"\"\"<<<>>>",
        long_multibyte.as_str(),
        // one character that takes the counting path each
        "https://e.com/a&",
        "https://e.com/<",
        "https://e.com/>",
        "https://e.com/\"",
        "https://e.com/'",
        "https://e.com/\u{e9}",
    ] {
        let sql: i32 = sqlx::query_scalar("SELECT sitemap_entry_bytes($1)")
            .bind(loc)
            .fetch_one(&pool)
            .await
            .expect("size");
        assert_eq!(sql as usize, entry_bytes(loc), "{loc}");
    }
}

/// Whether the schema stores a row with these values.
async fn accepted(pool: &PgPool, section: &str, changefreq: &str) -> bool {
    sqlx::query("INSERT INTO sitemap_urls (section, loc, changefreq) VALUES ($1, $2, $3)")
        .bind(section)
        .bind(format!("{BASE_URL}{section}/{changefreq}"))
        .bind(changefreq)
        .execute(pool)
        .await
        .is_ok()
}

#[sqlx::test]
async fn the_schema_and_the_service_share_the_slug_and_changefreq_rules(pool: PgPool) {
    TestApp::spawn(pool.clone()).await;
    for changefreq in CHANGEFREQS {
        assert!(accepted(&pool, "", changefreq).await, "{changefreq}");
    }
    for other in ["Daily", "sometimes", "", "daily "] {
        assert!(!accepted(&pool, "", other).await, "{other:?}");
    }
    let longest = "a".repeat(64);
    let too_long = "a".repeat(65);
    for section in [
        "blog", "a", "0-9", "a_b-c", &longest, &too_long, "-a", "_a", "Blog", "a b", "a.b", "é",
        "a/b",
    ] {
        assert_eq!(
            accepted(&pool, section, "daily").await,
            is_section_slug(section),
            "{section:?}"
        );
    }
}

#[sqlx::test]
async fn the_schema_refuses_what_no_sitemap_may_hold(pool: PgPool) {
    let long = format!("{BASE_URL}{}", "a".repeat(2049 - BASE_URL.len()));
    for (columns, values, constraint) in [
        ("loc", "'ftp://www.example.com/x'", "sitemap_urls_loc_url"),
        ("loc", "'www.example.com/x'", "sitemap_urls_loc_url"),
        ("loc", "'https:///no-host'", "sitemap_urls_loc_url"),
        ("loc", "'http://'", "sitemap_urls_loc_url"),
        ("loc", "'http://?q'", "sitemap_urls_loc_url"),
        ("loc", "'https://#f'", "sitemap_urls_loc_url"),
        ("loc", "'HTTPS://www.example.com/'", "sitemap_urls_loc_url"),
        ("loc", "'httpx://www.example.com/'", "sitemap_urls_loc_url"),
        (
            "loc",
            "'https://www.example.com/a b'",
            "sitemap_urls_loc_url",
        ),
        (
            "loc",
            "E'https://www.example.com/\\x01'",
            "sitemap_urls_loc_url",
        ),
        (
            "loc",
            "E'https://www.example.com/\\n'",
            "sitemap_urls_loc_url",
        ),
        ("loc", &format!("'{long}'"), "sitemap_urls_loc_url"),
        (
            "loc, changefreq",
            "'https://www.example.com/', 'sometimes'",
            "sitemap_urls_changefreq_value",
        ),
        (
            "loc, priority",
            "'https://www.example.com/', 1.5",
            "sitemap_urls_priority_range",
        ),
        (
            "loc, priority",
            "'https://www.example.com/', -0.1",
            "sitemap_urls_priority_range",
        ),
        (
            "loc, priority",
            "'https://www.example.com/', 'NaN'",
            "sitemap_urls_priority_range",
        ),
        (
            "loc, section",
            "'https://www.example.com/', 'My Section'",
            "sitemap_urls_section_slug",
        ),
        (
            "loc, section",
            "'https://www.example.com/', 'a/b'",
            "sitemap_urls_section_slug",
        ),
        (
            "loc, site",
            "'https://www.example.com/', ''",
            "sitemap_urls_site_slug",
        ),
    ] {
        let sql = format!("INSERT INTO sitemap_urls ({columns}) VALUES ({values})");
        let error = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&pool)
            .await
            .expect_err(&sql);
        let constraint_hit = error
            .as_database_error()
            .and_then(|e| e.constraint().map(str::to_owned));
        assert_eq!(
            constraint_hit.as_deref(),
            Some(constraint),
            "{sql}: {error}"
        );
    }
    let max = format!("{BASE_URL}{}", "a".repeat(2048 - BASE_URL.len()));
    sqlx::query("INSERT INTO sitemap_urls (loc, priority, changefreq) VALUES ($1, 0, 'never'), ($2, 1, 'always'), ($3, NULL, NULL)")
        .bind(&max)
        .bind(format!("{BASE_URL}edge"))
        .bind("http://h")
        .execute(&pool)
        .await
        .expect("edge values are admitted");
}

#[sqlx::test]
async fn updated_at_moves_on_real_changes_only(pool: PgPool) {
    sqlx::query("INSERT INTO sitemap_urls (loc, updated_at) VALUES ($1, '2020-01-01 00:00+00')")
        .bind(format!("{BASE_URL}x"))
        .execute(&pool)
        .await
        .expect("insert");
    let updated_at = || async {
        sqlx::query_scalar::<_, time::OffsetDateTime>("SELECT updated_at FROM sitemap_urls")
            .fetch_one(&pool)
            .await
            .expect("read")
    };
    sqlx::query("UPDATE sitemap_urls SET changefreq = NULL")
        .execute(&pool)
        .await
        .expect("no-op update");
    assert_eq!(updated_at().await.year(), 2020);
    sqlx::query("UPDATE sitemap_urls SET changefreq = 'daily'")
        .execute(&pool)
        .await
        .expect("update");
    assert!(updated_at().await.year() > 2020);
}

#[sqlx::test]
async fn row_ids_are_fixed(pool: PgPool) {
    sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
        .bind(format!("{BASE_URL}x"))
        .execute(&pool)
        .await
        .expect("insert");
    let error = sqlx::query("UPDATE sitemap_urls SET id = id + 100")
        .execute(&pool)
        .await
        .expect_err("ids are managed");
    assert!(error.to_string().contains("cannot change"), "{error}");
}

#[sqlx::test]
async fn truncate_empties_the_index(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 5).await;
    assert_eq!(app.index().await.len(), 1);
    sqlx::query("TRUNCATE sitemap_urls")
        .execute(&app.pool)
        .await
        .expect("truncate");
    app.fold().await;
    assert!(app.index().await.is_empty());
    app.insert_urls("", "q", 2).await;
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

#[sqlx::test]
async fn a_change_mark_written_by_hand_is_replaced_by_the_writers_own(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    // e.g. `INSERT … SELECT *` from a backup: a mark from another time (or
    // another cluster) would hide the row from folds; the schema replaces it.
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, change_xid)
         SELECT $1 || 'copy' || g, '3'::xid8 FROM generate_series(1, 3) g",
    )
    .bind(BASE_URL)
    .execute(&app.pool)
    .await
    .expect("copy");
    app.fold().await;
    assert_eq!(app.served_locs().await, app.table_locs().await);
    assert_eq!(app.served_locs().await.len(), 3);
}

#[sqlx::test]
async fn a_copy_carrying_change_marks_is_marked_with_the_copying_transaction(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let mut conn = app.pool.acquire().await.expect("connection");
    let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
    let writer: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text")
        .fetch_one(&mut *tx)
        .await
        .expect("xid");
    let mut copy = tx
        .copy_in_raw("COPY sitemap_urls (loc, change_xid) FROM STDIN")
        .await
        .expect("copy");
    let rows: String = (1..=4).map(|i| format!("{BASE_URL}dump{i}\t3\n")).collect();
    copy.send(rows.as_bytes()).await.expect("send");
    assert_eq!(copy.finish().await.expect("finish"), 4);
    tx.commit().await.expect("commit");

    let marks: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT change_xid::text FROM sitemap_urls")
            .fetch_all(&app.pool)
            .await
            .expect("marks");
    assert_eq!(marks, [writer]);
    app.fold().await;
    assert_eq!(app.served_locs().await.len(), 4);
}

#[sqlx::test]
async fn an_update_that_writes_another_change_mark_changes_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "p", 3).await;
    app.fold().await;
    let marks = "SELECT change_xid::text FROM sitemap_urls ORDER BY id";
    let before: Vec<String> = sqlx::query_scalar(marks)
        .fetch_all(&app.pool)
        .await
        .expect("marks");
    let etag = crate::helpers::header(&app.get("/sitemap_index.xml").await, "etag").to_owned();

    crate::helpers::exec(&app.pool, "UPDATE sitemap_urls SET change_xid = '3'").await;

    let after: Vec<String> = sqlx::query_scalar(marks)
        .fetch_all(&app.pool)
        .await
        .expect("marks");
    assert_eq!(after, before);
    assert_eq!(app.fold().await, 0);
    let response = app.get("/sitemap_index.xml").await;
    assert_eq!(crate::helpers::header(&response, "etag"), etag);
}

#[sqlx::test]
async fn a_copy_into_sitemap_urls_fires_no_row_trigger_before_inserting(pool: PgPool) {
    // PostgreSQL writes a COPY's rows a batch of pages at a time only into
    // a table without BEFORE INSERT row triggers; with one, every row is
    // inserted alone (measured: 9% slower on 1M rows).
    let before_insert_row_triggers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_trigger
         WHERE tgrelid = 'sitemap_urls'::regclass AND NOT tgisinternal
           -- row (1), before (2), insert (4)
           AND tgtype::integer & 7 = 7",
    )
    .fetch_one(&pool)
    .await
    .expect("triggers");
    assert_eq!(before_insert_row_triggers, 0);
}

#[sqlx::test]
async fn the_validator_and_the_schema_agree_on_which_locs_a_site_serves(pool: PgPool) {
    use sitemapd::ingest::validate::{RawRecord, Validator};

    let mut settings = sitemapd::config::Settings::defaults();
    settings.base_url = "https://www.example.com/shop/".into();
    let sites = sitemapd::config::Config::new(settings)
        .expect("valid")
        .sites;
    let site = &sites[0];
    let validator = Validator::new(&sites, "default", "", time::OffsetDateTime::now_utc());
    for loc in [
        "https://www.example.com/shop/",
        "https://www.example.com/shop/a?b=c&d=e",
        "HTTPS://WWW.EXAMPLE.COM/shop/Caf\u{e9}",
        "https://www.example.com:443/shop/x",
        "https://www.example.com/shop/a/../../x",
        "https://www.example.com/shopping",
        "https://www.example.com/Shop/x",
        "https://www.example.com:8443/shop/x",
        "http://www.example.com/shop/x",
        "https://example.com/shop/x",
        "https://www.example.com.evil.org/shop/x",
    ] {
        let record = RawRecord {
            loc: Some(loc.into()),
            ..RawRecord::default()
        };
        let accepted = validator.validate(&record);
        // What the validator would store, or the loc as given if it refused it.
        let stored = accepted.as_ref().map_or(loc.to_owned(), |r| r.loc.clone());
        let served: bool = sqlx::query_scalar("SELECT sitemap_loc_in_scope($1, $2, $3)")
            .bind(&stored)
            .bind(&site.origin)
            .bind(&site.path_prefix)
            .fetch_one(&pool)
            .await
            .expect("scope");
        assert_eq!(accepted.is_ok(), served, "{loc} (stored as {stored})");
    }
}

#[sqlx::test]
async fn the_schema_the_validator_and_the_writer_measure_a_loc_as_served(pool: PgPool) {
    use sitemapd::ingest::validate::{RawRecord, Validator};
    use sitemapd::sitemap::writer::served_chars;

    let app = TestApp::spawn(pool).await;
    // "é" is two bytes, six characters once percent-encoded:
    // 24 + 2 + 337 × 6 = 2,048.
    let at_limit = format!("{BASE_URL}aa{}", "é".repeat(337));
    let over = format!("{at_limit}a");
    assert_eq!(served_chars(&at_limit), 2048);
    assert_eq!(served_chars(&over), 2049);

    // The schema, for plain SQL.
    let insert = |loc: String| {
        sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
            .bind(loc)
            .execute(&app.pool)
    };
    insert(at_limit.clone())
        .await
        .expect("2,048 as served fits");
    let refused = insert(over.clone()).await.expect_err("2,049 as served");
    assert!(
        refused.to_string().contains("sitemap_urls_loc_url"),
        "{refused}"
    );

    // The validator, for import and the write API: the normalised loc is
    // the served form.
    let sites = app.sites().await;
    let validator = Validator::new(&sites, "default", "", time::OffsetDateTime::now_utc());
    let validate = |loc: &str| {
        validator.validate(&RawRecord {
            loc: Some(loc.to_owned()),
            ..RawRecord::default()
        })
    };
    let accepted = validate(&at_limit).expect("2,048 as served is valid");
    assert_eq!(accepted.loc.chars().count(), 2048);
    let errors = validate(&over).expect_err("2,049 as served");
    assert_eq!(errors[0].rule, Rule::LocLength, "{errors:?}");

    // The page serves it, valid against the XSD.
    app.fold().await;
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(page.urls.len(), 1);
    assert_eq!(page.urls[0].loc.chars().count(), 2048);
}

#[sqlx::test]
async fn page_changes_name_their_sites_in_a_bounded_payload(pool: PgPool) {
    let mut listener = sqlx::postgres::PgListener::connect_with(&pool)
        .await
        .expect("listener");
    listener.listen("sitemapd_pages").await.expect("LISTEN");
    let insert = |sites: i64| {
        format!(
            "INSERT INTO sitemap_pages (site, section, page, url_count, bytes, lastmod)
             SELECT 's' || n, '', 1, 0, 0, now() FROM generate_series(1, {sites}) n"
        )
    };
    sqlx::query(sqlx::AssertSqlSafe(insert(3)))
        .execute(&pool)
        .await
        .expect("three sites' pages");
    assert_eq!(notices(&mut listener, 1).await, ["s1 s2 s3"]);
    sqlx::query("UPDATE sitemap_pages SET url_count = 1 WHERE site = 's2'")
        .execute(&pool)
        .await
        .expect("one site's page");
    assert_eq!(notices(&mut listener, 1).await, ["s2"]);

    // 20,000 sites in one statement: a bounded number of notifications,
    // each within PostgreSQL's 8,000 bytes, the last saying "every site".
    sqlx::query("DELETE FROM sitemap_pages")
        .execute(&pool)
        .await
        .expect("delete");
    assert_eq!(notices(&mut listener, 1).await, ["s1 s2 s3"]);
    sqlx::query(sqlx::AssertSqlSafe(insert(20_000)))
        .execute(&pool)
        .await
        .expect("20,000 sites' pages");
    let payloads = notices(&mut listener, 8).await;
    assert!(payloads.iter().all(|p| p.len() <= 7_900));
    assert_eq!(payloads.last().map(String::as_str), Some("*"));
    assert!(payloads[..7].iter().all(|p| p.starts_with('s')));
    sqlx::query("SELECT pg_notify('sitemapd_pages', 'after')")
        .execute(&pool)
        .await
        .expect("a marker");
    assert_eq!(
        notices(&mut listener, 1).await,
        ["after"],
        "no more than eight"
    );
}

/// The next `count` notices' payloads.
async fn notices(listener: &mut sqlx::postgres::PgListener, count: usize) -> Vec<String> {
    let mut payloads = Vec::new();
    while payloads.len() < count {
        let notice = tokio::time::timeout(std::time::Duration::from_secs(5), listener.recv())
            .await
            .expect("a notice in time")
            .expect("a notice");
        payloads.push(notice.payload().to_owned());
    }
    payloads
}
