//! The write API over HTTP: auth, batches applied whole or not at all,
//! every refusal a problem document, and writes visible in the very next
//! sitemap fetch.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, binary, header};

pub(crate) const TOKEN: &str = "smd_test-token-for-the-write-api";
const JSON: (&str, &str) = ("content-type", "application/json");
const NDJSON: (&str, &str) = ("content-type", "application/x-ndjson");

pub(crate) async fn spawn_api(
    pool: PgPool,
    configure: impl FnOnce(&mut sitemapd::config::Settings),
) -> TestApp {
    TestApp::spawn_with(pool, |s| {
        s.api_token_hashes = vec![sitemapd::tokens::hash_of(TOKEN)];
        configure(s);
    })
    .await
}

/// Sends a request with `headers` and the token.
async fn send_authed(
    app: &TestApp,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let auth = format!("Bearer {TOKEN}");
    let mut headers = headers.to_vec();
    headers.push(("authorization", &auth));
    app.send(method, path, &headers, body).await
}

/// `GET /api/v1/stats` with the token, parsed.
pub(crate) async fn site_stats(app: &TestApp) -> Value {
    let response = send_authed(app, Method::GET, "/api/v1/stats", &[], "").await;
    assert_eq!(response.status(), 200, "/api/v1/stats");
    response.json().await.expect("JSON")
}

/// Sends `body` with the token; returns the status and the parsed JSON.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    content_type: (&str, &str),
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let response = send_authed(app, method, path, &[content_type], body).await;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{status}: not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (status, json)
}

pub(crate) async fn put(app: &TestApp, records: Value) -> (u16, Value) {
    call(app, Method::PUT, "/api/v1/urls", JSON, records.to_string()).await
}

async fn row_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM sitemap_urls")
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

fn loc(path: &str) -> String {
    format!("{BASE_URL}{path}")
}

#[sqlx::test]
async fn without_a_token_the_api_says_which_it_takes(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let response = app.send(Method::PUT, "/api/v1/urls", &[JSON], "[]").await;
    assert_eq!(response.status(), 401);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let problem: Value = response.json_value().await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("api_token_hashes")
    );
}

#[sqlx::test]
async fn only_a_configured_token_is_admitted(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let body = json!([{ "loc": loc("a") }]).to_string();
    for auth in [
        None,
        Some("Bearer smd_wrong"),
        Some("Basic dXNlcjpwYXNz"),
        Some(TOKEN),
    ] {
        let mut headers = vec![JSON];
        if let Some(auth) = auth {
            headers.push(("authorization", auth));
        }
        let response = app
            .send(Method::PUT, "/api/v1/urls", &headers, body.clone())
            .await;
        assert_eq!(response.status(), 401, "{auth:?}");
        assert_eq!(
            header(&response, "www-authenticate"),
            "Bearer realm=\"sitemapd\""
        );
        assert_eq!(
            header(&response, "content-type"),
            "application/problem+json"
        );
    }
    assert_eq!(row_count(&app).await, 0);
    // The scheme is case-insensitive (RFC 9110).
    let auth = format!("bearer {TOKEN}");
    let response = app
        .send(
            Method::PUT,
            "/api/v1/urls",
            &[JSON, ("authorization", &auth)],
            body,
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(row_count(&app).await, 1);
}

#[sqlx::test]
async fn an_upsert_shows_up_in_the_next_sitemap_fetch(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    assert!(app.served_locs().await.is_empty());
    let records = json!([
        { "loc": loc("a"), "lastmod": "2024-05-01", "changefreq": "daily", "priority": 0.8 },
        { "loc": loc("blog/b"), "section": "blog", "priority": "0.5" },
    ]);
    let (status, summary) = put(&app, records.clone()).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(
        summary,
        json!({ "received": 2, "inserted": 2, "updated": 0, "unchanged": 0 })
    );
    assert_eq!(app.served_locs().await, [loc("a"), loc("blog/b")]);
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(
        page.urls[0].lastmod.as_deref(),
        Some("2024-05-01T00:00:00+00:00")
    );
    assert_eq!(page.urls[0].changefreq.as_deref(), Some("daily"));

    // The same batch again changes nothing, and moves no lastmod.
    let index_before = app.index().await;
    let (_, summary) = put(&app, records).await;
    assert_eq!(
        summary,
        json!({ "received": 2, "inserted": 0, "updated": 0, "unchanged": 2 })
    );
    assert_eq!(app.index().await, index_before);

    // A change is served at once.
    let (_, summary) = put(
        &app,
        json!([{ "loc": loc("a"), "lastmod": "2025-01-02T03:04:05Z" }]),
    )
    .await;
    assert_eq!(summary["updated"], 1);
    let page = app.page("/sitemap-1.xml.gz").await;
    assert_eq!(
        page.urls[0].lastmod.as_deref(),
        Some("2025-01-02T03:04:05+00:00")
    );
    assert_eq!(page.urls[0].changefreq, None);
}

#[sqlx::test]
async fn invalid_records_are_all_named_and_nothing_is_written(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let (status, problem) = put(
        &app,
        json!([
            { "loc": loc("fine") },
            { "loc": "ftp://www.example.com/x" },
            { "loc": loc("y"), "priority": 1.5, "changefreq": "sometimes" },
            { "loc": loc("z"), "colour": "red" },
            "just a string",
        ]),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(problem["type"], "urn:sitemapd:problem:invalid-records");
    assert_eq!(problem["status"], 422);
    let errors: Vec<(u64, String)> = problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().expect("index"),
                e["field"].as_str().expect("field").to_owned(),
            )
        })
        .collect();
    let expected = [
        (1, "loc"),
        (2, "changefreq"),
        (2, "priority"),
        (3, "record"),
        (4, "record"),
    ];
    let mut errors = errors;
    errors.sort();
    assert_eq!(errors, expected.map(|(i, f)| (i, f.to_owned())));
    let detail = problem["errors"][0]["detail"].as_str().expect("detail");
    assert!(
        detail.starts_with("record [1]: loc \"ftp://www.example.com/x\""),
        "{detail}"
    );
    assert_eq!(
        row_count(&app).await,
        0,
        "a batch with one bad record writes nothing"
    );

    // NDJSON errors name lines.
    let body = format!(
        "{{\"loc\": \"{}\"}}\n\n{{\"loc\": \"{}\", \"lastmod\": \"3000-01-01\"}}\n",
        loc("a"),
        loc("b")
    );
    let (status, problem) = call(&app, Method::PUT, "/api/v1/urls", NDJSON, body).await;
    assert_eq!(status, 422);
    assert_eq!(problem["errors"][0]["line"], 3);
    assert_eq!(problem["errors"][0]["field"], "lastmod");
    assert!(problem["errors"][0]["index"].is_null());
    assert_eq!(row_count(&app).await, 0);
}

#[sqlx::test]
async fn a_batch_failing_in_the_database_leaves_nothing_behind(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    put(&app, json!([{ "loc": loc("kept"), "priority": 0.1 }])).await;
    // A rule only the database knows: the batch passes validation, then
    // its third record fails inside the transaction.
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.loc LIKE '%poison%' THEN RAISE EXCEPTION 'poisoned row'; END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON sitemap_urls
             FOR EACH ROW EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&app.pool)
    .await
    .expect("trigger");
    app.fold().await;
    let response = send_authed(
        &app,
        Method::PUT,
        "/api/v1/urls",
        &[JSON],
        json!([
            { "loc": loc("kept"), "priority": 0.9 },
            { "loc": loc("new") },
            { "loc": loc("poison") },
        ])
        .to_string(),
    )
    .await;
    assert_eq!(response.status(), 503);
    let rows: Vec<(String, Option<f32>)> =
        sqlx::query_as("SELECT loc, priority FROM sitemap_urls ORDER BY loc")
            .fetch_all(&app.pool)
            .await
            .expect("rows");
    assert_eq!(
        rows,
        [(loc("kept"), Some(0.1))],
        "neither the update nor the insert stayed"
    );
}

#[sqlx::test]
async fn bodies_over_the_limits_are_413(pool: PgPool) {
    let app = spawn_api(pool, |s| {
        s.api_max_body_bytes = 4096;
        s.api_max_records = 3;
    })
    .await;
    let records = |n: usize| {
        Value::Array(
            (0..n)
                .map(|i| json!({ "loc": loc(&format!("p{i}")) }))
                .collect(),
        )
    };
    let (status, problem) = put(&app, records(4)).await;
    assert_eq!(status, 413);
    assert_eq!(problem["type"], "urn:sitemapd:problem:too-many-records");
    let (status, _) = put(&app, records(3)).await;
    assert_eq!(status, 200);

    let long = json!([{ "loc": loc(&"x".repeat(5000)) }]).to_string();
    let (status, problem) = call(&app, Method::PUT, "/api/v1/urls", JSON, long).await;
    assert_eq!(status, 413);
    assert_eq!(problem["type"], "urn:sitemapd:problem:body-too-large");

    // Small on the wire, too large once decompressed: counted after.
    let padded = format!("[{}{}]", " ".repeat(100_000), json!({ "loc": loc("q") }));
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(padded.as_bytes()).expect("gzip");
    let gz = gz.finish().expect("gzip");
    assert!(gz.len() < 4096);
    let response = send_authed(
        &app,
        Method::PUT,
        "/api/v1/urls",
        &[JSON, ("content-encoding", "gzip")],
        gz,
    )
    .await;
    assert_eq!(response.status(), 413);
    assert_eq!(row_count(&app).await, 3);
}

#[sqlx::test]
async fn gzip_bodies_are_decoded_and_unknown_media_types_are_415(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let ndjson = format!(
        "{}\n{}\n",
        json!({ "loc": loc("g1") }),
        json!({ "loc": loc("g2") })
    );
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(ndjson.as_bytes()).expect("gzip");
    let response = send_authed(
        &app,
        Method::PUT,
        "/api/v1/urls",
        &[NDJSON, ("content-encoding", "gzip")],
        gz.finish().expect("gzip"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(row_count(&app).await, 2);

    for headers in [
        vec![("content-type", "text/plain")],
        vec![],
        vec![JSON, ("content-encoding", "br")],
    ] {
        let response = send_authed(
            &app,
            Method::PUT,
            "/api/v1/urls",
            &headers,
            json!([{ "loc": loc("h") }]).to_string(),
        )
        .await;
        assert_eq!(response.status(), 415, "{headers:?}");
        assert_eq!(
            header(&response, "content-type"),
            "application/problem+json"
        );
    }
    let (status, problem) = call(&app, Method::PUT, "/api/v1/urls", JSON, "{\"loc\": 1").await;
    assert_eq!(status, 400);
    assert_eq!(problem["type"], "urn:sitemapd:problem:malformed-body");
    assert_eq!(row_count(&app).await, 2);
}

#[sqlx::test]
async fn deletes_are_atomic_batches_of_locs(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    app.insert_urls("", "d", 3).await;
    let (status, problem) = call(
        &app,
        Method::DELETE,
        "/api/v1/urls",
        JSON,
        json!([loc("d1"), "not a url"]).to_string(),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(problem["errors"][0]["index"], 1);
    assert_eq!(row_count(&app).await, 3, "nothing deleted");

    let (status, summary) = call(
        &app,
        Method::DELETE,
        "/api/v1/urls",
        JSON,
        json!([loc("d1"), { "loc": loc("d3"), "site": "default" }, loc("never")]).to_string(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(summary, json!({ "received": 3, "deleted": 2, "absent": 1 }));
    assert_eq!(app.served_locs().await, [loc("d2")]);
}

#[sqlx::test]
async fn a_record_is_found_by_either_spelling_of_its_loc(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    put(&app, json!([{ "loc": loc("café"), "section": "food" }])).await;
    for spelling in ["café", "caf%C3%A9"] {
        let query = format!("/api/v1/urls?loc={}", urlencode(&loc(spelling)));
        let response = send_authed(&app, Method::GET, &query, &[], "").await;
        assert_eq!(response.status(), 200, "{spelling}");
        let record: Value = response.json_value().await;
        assert_eq!(record["loc"], loc("caf%C3%A9"));
        assert_eq!(record["section"], "food");
        assert_eq!(record["page"], 1);
        assert_eq!(
            record["sitemap"],
            format!("{BASE_URL}sitemap-food-1.xml.gz")
        );
        assert!(record["skip_reason"].is_null());
    }
    let query = format!("/api/v1/urls?loc={}", urlencode(&loc("nothing")));
    let response = send_authed(&app, Method::GET, &query, &[], "").await;
    assert_eq!(response.status(), 404);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let response = send_authed(&app, Method::GET, "/api/v1/urls", &[], "").await;
    assert_eq!(response.status(), 400, "loc is required");
}

#[sqlx::test]
async fn stats_count_sites_sections_pages_and_skips(pool: PgPool) {
    let app = spawn_api(pool, |s| s.max_urls = 2).await;
    app.insert_urls("", "p", 3).await;
    app.insert_urls("blog", "b", 1).await;
    sqlx::query(
        "INSERT INTO sitemap_urls (section, loc) VALUES ('blog', 'https://elsewhere.example/x')",
    )
    .execute(&app.pool)
    .await
    .expect("an out-of-scope row");
    app.fold().await;
    let stats = site_stats(&app).await;
    let site = &stats["sites"][0];
    assert_eq!(
        (
            site["site"].as_str(),
            site["urls"].as_i64(),
            site["skipped"].as_i64()
        ),
        (Some("default"), Some(4), Some(1))
    );
    let sections = site["sections"].as_array().expect("sections");
    assert_eq!(sections[0]["section"], "");
    assert_eq!(sections[0]["urls"], 3);
    let pages: Vec<i64> = sections[0]["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .map(|p| p["urls"].as_i64().expect("urls"))
        .collect();
    assert_eq!(pages, [2, 1]);
    assert_eq!(
        sections[0]["pages"][1]["sitemap"],
        format!("{BASE_URL}sitemap-2.xml.gz")
    );
    assert_eq!(
        (
            sections[1]["section"].as_str(),
            sections[1]["urls"].as_i64(),
            sections[1]["skipped"].as_i64()
        ),
        (Some("blog"), Some(1), Some(1))
    );
}

#[sqlx::test]
async fn the_openapi_document_matches_the_routes(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let response = app.get("/api/v1/openapi.json").await;
    assert_eq!(response.status(), 200, "the document needs no token");
    let doc: Value = response.json_value().await;
    assert!(doc["openapi"].as_str().expect("version").starts_with("3."));
    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("operations").keys() {
            operations.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    operations.sort();
    assert_eq!(
        operations,
        [
            "DELETE /api/v1/sites/{name}",
            "DELETE /api/v1/sites/{name}/tokens/{digest}",
            "DELETE /api/v1/urls",
            "GET /api/v1/crawlers",
            "GET /api/v1/sites",
            "GET /api/v1/sites/{name}",
            "GET /api/v1/sites/{name}/tokens",
            "GET /api/v1/stats",
            "GET /api/v1/urls",
            "POST /api/v1/sites/{name}/tokens",
            "PUT /api/v1/sites/{name}",
            "PUT /api/v1/urls"
        ]
    );
    // Each documented operation exists, and wants the token it documents.
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for operation in &operations {
        let (method, path) = operation.split_once(' ').expect("method and path");
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let response = app.send(method, path, &[JSON], "[]").await;
        assert_eq!(response.status(), 401, "{operation}");
    }
    // And nothing undocumented answers.
    let response = send_authed(&app, Method::POST, "/api/v1/urls", &[JSON], "[]").await;
    assert_eq!(response.status(), 405);
    let response = send_authed(&app, Method::GET, "/api/v1/pages", &[], "").await;
    assert_eq!(response.status(), 404);
    for schema in [
        "RawRecord",
        "Problem",
        "RecordError",
        "WriteSummary",
        "Stats",
    ] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
}

#[sqlx::test]
async fn a_minted_token_works_once_its_hash_is_configured(pool: PgPool) {
    let output = tokio::task::spawn_blocking({
        let mut command = binary(&pool);
        move || command.arg("token").output().expect("sitemapd token runs")
    })
    .await
    .expect("joined");
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    let value = |label: &str| {
        printed
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|| panic!("no {label} line in {printed}"))
    };
    let (token, hash) = (value("token:"), value("hash:"));
    let app = TestApp::spawn_with(pool, |s| s.api_token_hashes = vec![hash]).await;
    let auth = format!("Bearer {token}");
    let response = app
        .send(
            Method::GET,
            "/api/v1/stats",
            &[("authorization", &auth)],
            "",
        )
        .await;
    assert_eq!(response.status(), 200);
}

fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

pub(crate) trait JsonBody {
    async fn json_value(self) -> Value;
}

impl JsonBody for reqwest::Response {
    async fn json_value(self) -> Value {
        let bytes = self.bytes().await.expect("body");
        serde_json::from_slice(&bytes).expect("a JSON body")
    }
}

#[sqlx::test]
async fn a_multi_member_gzip_body_is_decoded_whole_or_refused(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let member = |record: Value| {
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(format!("{record}\n").as_bytes())
            .expect("gzip");
        gz.finish().expect("gzip")
    };
    // `cat a.gz b.gz` is one gzip file: both records are applied.
    let whole = [
        member(json!({ "loc": loc("m1") })),
        member(json!({ "loc": loc("m2") })),
    ]
    .concat();
    let response = send_authed(
        &app,
        Method::PUT,
        "/api/v1/urls",
        &[NDJSON, ("content-encoding", "gzip")],
        whole.clone(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(row_count(&app).await, 2);

    // Anything after the last member that is not one refuses the body.
    let trailing = [whole, b"not gzip".to_vec()].concat();
    let response = send_authed(
        &app,
        Method::PUT,
        "/api/v1/urls",
        &[NDJSON, ("content-encoding", "gzip")],
        trailing,
    )
    .await;
    assert_eq!(response.status(), 400);
    let problem: Value =
        serde_json::from_slice(&response.bytes().await.expect("body")).expect("problem document");
    assert_eq!(problem["type"], "urn:sitemapd:problem:bad-gzip");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("does not decode")),
        "{problem}"
    );
    assert_eq!(row_count(&app).await, 2);
}
