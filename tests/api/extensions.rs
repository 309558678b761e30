//! The sitemap extensions: images, videos and hreflang alternates, written
//! with plain SQL or through the API, served valid against the extensions'
//! schemas, within the byte limit, and refused with the rule named.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;
use time::OffsetDateTime;

use sitemapd::config::Config;
use sitemapd::ingest::validate::{RawRecord, Validator};
use sitemapd::sitemap::codes::LANGUAGES;
use sitemapd::sitemap::writer::entry_bytes;

use crate::helpers::{BASE_URL, TestApp, header};
use crate::write_api::{JsonBody, put, spawn_api};

fn loc(path: &str) -> String {
    format!("{BASE_URL}{path}")
}

fn images(n: usize, prefix: &str) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({ "loc": format!("https://cdn.example.net/{prefix}/{i}.jpg") }))
            .collect(),
    )
}

fn video(title: &str) -> Value {
    json!({
        "thumbnail_loc": "https://cdn.example.net/t/1.jpg",
        "title": title,
        "description": "Grilling steaks <for> summer & more",
        "content_loc": "https://video.example.net/1.mp4",
        "player_loc": "https://www.example.com/player?v=1&autoplay=0",
        "duration": 600,
        "expiration_date": "2030-11-05T19:20:30+08:00",
        "rating": 4.2,
        "view_count": 12345,
        "publication_date": "2024-11-05",
        "family_friendly": true,
        "restriction": { "relationship": "allow", "countries": ["IE", "GB", "US", "CA"] },
        "platform": { "relationship": "deny", "platforms": ["tv"] },
        "requires_subscription": false,
        "uploader": { "name": "GrillyMcGrillerson", "info": loc("users/grilly") },
        "live": false,
        "tags": ["steak", "summer", "outdoor"]
    })
}

/// A row to insert: its path, images, videos, and hreflangs with cluster.
type Row<'a> = (&'a str, Value, Value, Option<(&'a [&'a str], &'a str)>);

/// Inserts rows with extension columns (JSON text per column), then folds.
async fn insert(app: &TestApp, rows: &[Row<'_>]) {
    for (path, images, videos, cluster) in rows {
        let json = |v: &Value| (!v.is_null()).then(|| v.to_string());
        sqlx::query(
            "INSERT INTO sitemap_urls (loc, images, videos, hreflang, hreflang_cluster)
             VALUES ($1, $2::jsonb, $3::jsonb, $4, $5)",
        )
        .bind(loc(path))
        .bind(json(images))
        .bind(json(videos))
        .bind(cluster.map(|(codes, _)| codes.iter().map(|c| c.to_string()).collect::<Vec<_>>()))
        .bind(cluster.map(|(_, name)| name.to_string()))
        .execute(&app.pool)
        .await
        .unwrap_or_else(|e| panic!("insert {path}: {e}"));
    }
    app.fold().await;
}

/// Each of the first three pages' ETag and Last-Modified, and the index.
async fn versions(app: &TestApp) -> (Vec<(String, String)>, Vec<crate::helpers::IndexEntry>) {
    let mut seen = Vec::new();
    for page in [
        "/sitemap-1.xml.gz",
        "/sitemap-2.xml.gz",
        "/sitemap-3.xml.gz",
    ] {
        let response = app.get(page).await;
        seen.push((
            header(&response, "etag").to_owned(),
            header(&response, "last-modified").to_owned(),
        ));
    }
    (seen, app.index().await)
}

/// Every served URL's links, by loc.
async fn served_links(app: &TestApp) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut links = BTreeMap::new();
    for (path, _) in app.crawl().await {
        for url in app.page(&path).await.urls {
            let set: BTreeSet<_> = url
                .links
                .iter()
                .map(|l| {
                    assert_eq!(l.rel, "alternate");
                    (l.hreflang.clone(), l.href.clone())
                })
                .collect();
            links.insert(url.loc, set);
        }
    }
    links
}

#[sqlx::test]
async fn images_videos_and_alternates_are_served_with_their_namespaces(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    insert(
        &app,
        &[
            ("gallery", images(3, "g"), Value::Null, None),
            (
                "steaks",
                Value::Null,
                json!([video("Grilling steaks")]),
                None,
            ),
            (
                "en/p",
                Value::Null,
                Value::Null,
                Some((&["en", "x-default"], "p")),
            ),
            ("de/p", Value::Null, Value::Null, Some((&["de-AT"], "p"))),
        ],
    )
    .await;
    sqlx::query("INSERT INTO sitemap_urls (section, loc) VALUES ('plain', $1)")
        .bind(loc("plain"))
        .execute(&app.pool)
        .await
        .expect("plain row");
    app.fold().await;

    let (page, xml) = app.plain_page("/sitemap-1.xml").await;
    let xml = String::from_utf8(xml).expect("UTF-8");
    for namespace in [
        "xmlns:xhtml=\"http://www.w3.org/1999/xhtml\"",
        "xmlns:image=\"http://www.google.com/schemas/sitemap-image/1.1\"",
        "xmlns:video=\"http://www.google.com/schemas/sitemap-video/1.1\"",
    ] {
        assert!(xml.contains(namespace), "{namespace} declared");
    }
    let by_loc: BTreeMap<_, _> = page.urls.iter().map(|u| (u.loc.as_str(), u)).collect();
    let gallery = by_loc[loc("gallery").as_str()];
    assert_eq!(
        gallery
            .images
            .iter()
            .map(|i| i.loc.as_str())
            .collect::<Vec<_>>(),
        [0, 1, 2].map(|i| format!("https://cdn.example.net/g/{i}.jpg"))
    );
    let steaks = &by_loc[loc("steaks").as_str()].videos[0];
    assert_eq!(steaks.title, "Grilling steaks");
    assert_eq!(steaks.tags, ["steak", "summer", "outdoor"]);
    assert!(xml.contains(
        "<video:description>Grilling steaks &lt;for&gt; summer &amp; more</video:description>"
    ));
    assert!(
        xml.contains("<video:restriction relationship=\"allow\">IE GB US CA</video:restriction>")
    );
    assert!(xml.contains("<video:family_friendly>yes</video:family_friendly>"));
    assert!(xml.contains("<video:rating>4.2</video:rating>"));
    let cluster: BTreeSet<(String, String)> =
        [("de-AT", "de/p"), ("en", "en/p"), ("x-default", "en/p")]
            .iter()
            .map(|(code, path)| (code.to_string(), loc(path)))
            .collect();
    for member in ["en/p", "de/p"] {
        let links: BTreeSet<_> = by_loc[loc(member).as_str()]
            .links
            .iter()
            .map(|l| (l.hreflang.clone(), l.href.clone()))
            .collect();
        assert_eq!(
            links, cluster,
            "{member} lists every member, itself included"
        );
    }

    // A page whose entries carry no extension declares none.
    let (_, plain) = app.plain_page("/sitemap-plain-1.xml").await;
    let plain = String::from_utf8(plain).expect("UTF-8");
    assert!(
        !plain.contains("xmlns:image") && !plain.contains("xmlns:xhtml"),
        "{plain}"
    );
}

#[sqlx::test]
async fn a_thousand_images_per_url_fill_pages_within_a_lowered_max_bytes(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = 250_000).await;
    let rows: Vec<(String, Value)> = (0..7)
        .map(|i| (format!("p{i}"), images(1000, &format!("p{i}"))))
        .collect();
    let rows: Vec<_> = rows
        .iter()
        .map(|(path, imgs)| (path.as_str(), imgs.clone(), Value::Null, None))
        .collect();
    insert(&app, &rows).await;
    let mut served = 0;
    let pages = app.crawl().await;
    assert!(
        pages.len() >= 3,
        "a page holds two or three of them: {pages:?}"
    );
    for (path, _) in &pages {
        // The helper checks every page against max_bytes and the schemas.
        for url in app.page(path).await.urls {
            assert_eq!(url.images.len(), 1000, "{}", url.loc);
            served += 1;
        }
    }
    assert_eq!(served, 7);

    let too_many = sqlx::query("INSERT INTO sitemap_urls (loc, images) VALUES ($1, $2::jsonb)")
        .bind(loc("too-many"))
        .bind(images(1001, "x").to_string())
        .execute(&app.pool)
        .await
        .expect_err("1,001 images");
    assert!(
        too_many
            .to_string()
            .contains("at most 1,000 images per URL"),
        "{too_many}"
    );
}

#[sqlx::test]
async fn a_cluster_of_fifty_languages_is_complete_on_every_member(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = 40_000).await;
    let codes: Vec<&str> = LANGUAGES.iter().copied().step_by(3).take(50).collect();
    assert_eq!(codes.len(), 50);
    let members: Vec<(String, [&str; 1])> = codes
        .iter()
        .map(|code| (format!("{code}/product"), [*code]))
        .collect();
    let rows: Vec<_> = members
        .iter()
        .map(|(path, code)| {
            (
                path.as_str(),
                Value::Null,
                Value::Null,
                Some((&code[..], "product")),
            )
        })
        .collect();
    insert(&app, &rows).await;

    let expected: BTreeSet<(String, String)> = codes
        .iter()
        .map(|code| (code.to_string(), loc(&format!("{code}/product"))))
        .collect();
    let links = served_links(&app).await;
    assert_eq!(links.len(), 50);
    for (member, set) in &links {
        assert_eq!(set, &expected, "{member} lists all 50, itself included");
    }
    assert!(
        app.crawl().await.len() > 1,
        "50 entries of 50 links need several pages"
    );
}

#[sqlx::test]
async fn cluster_changes_move_every_members_page_and_never_serve_half(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 2).await;
    // Three members, each on its own page beside a plain row.
    for (i, code) in ["en", "de", "fr"].iter().enumerate() {
        sqlx::query(
            "INSERT INTO sitemap_urls (loc, hreflang, hreflang_cluster) VALUES ($1, ARRAY[$2], 'c')",
        )
        .bind(loc(&format!("{code}/c")))
        .bind(code)
        .execute(&app.pool)
        .await
        .expect("member");
        sqlx::query("INSERT INTO sitemap_urls (loc) VALUES ($1)")
            .bind(loc(&format!("filler{i}")))
            .execute(&app.pool)
            .await
            .expect("filler");
        app.fold().await;
    }
    let expect_members = |links: &BTreeMap<String, BTreeSet<(String, String)>>,
                          members: &[&str]| {
        let expected: BTreeSet<(String, String)> = members
            .iter()
            .map(|code| (code.to_string(), loc(&format!("{code}/c"))))
            .collect();
        for code in members {
            assert_eq!(links[&loc(&format!("{code}/c"))], expected, "{code}");
        }
    };
    expect_members(&served_links(&app).await, &["de", "en", "fr"]);
    let (before, index_before) = versions(&app).await;

    // A fourth member: every member's page changes, the index with it.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    sqlx::query(
        "INSERT INTO sitemap_urls (loc, hreflang, hreflang_cluster) VALUES ($1, '{it}', 'c')",
    )
    .bind(loc("it/c"))
    .execute(&app.pool)
    .await
    .expect("fourth");
    app.fold().await;
    let (after, index_after) = versions(&app).await;
    for (i, (was, now)) in before.iter().zip(&after).enumerate() {
        assert_ne!(was.0, now.0, "page {} ETag", i + 1);
        assert_ne!(was.1, now.1, "page {} Last-Modified", i + 1);
        assert!(
            index_after[i].lastmod > index_before[i].lastmod,
            "page {} lastmod",
            i + 1
        );
    }
    expect_members(&served_links(&app).await, &["de", "en", "fr", "it"]);

    // A member deleted: the others stop linking it.
    sqlx::query("DELETE FROM sitemap_urls WHERE loc = $1")
        .bind(loc("fr/c"))
        .execute(&app.pool)
        .await
        .expect("delete");
    app.fold().await;
    let links = served_links(&app).await;
    assert!(!links.contains_key(&loc("fr/c")));
    expect_members(&links, &["de", "en", "it"]);

    // Two members claiming one hreflang: no member serves the cluster.
    sqlx::query("UPDATE sitemap_urls SET hreflang = '{de}' WHERE loc = $1")
        .bind(loc("it/c"))
        .execute(&app.pool)
        .await
        .expect("conflict");
    app.fold().await;
    let links = served_links(&app).await;
    for code in ["de", "en", "it"] {
        assert!(
            links[&loc(&format!("{code}/c"))].is_empty(),
            "{code} serves no half cluster"
        );
    }
    let problem: String =
        sqlx::query_scalar("SELECT problem FROM sitemap_clusters WHERE cluster = 'c'")
            .fetch_one(&app.pool)
            .await
            .expect("problem");
    assert!(
        problem.contains("hreflang de is claimed by more than one URL"),
        "{problem}"
    );

    // Mended: served whole again.
    sqlx::query("UPDATE sitemap_urls SET hreflang = '{it}' WHERE loc = $1")
        .bind(loc("it/c"))
        .execute(&app.pool)
        .await
        .expect("mend");
    app.fold().await;
    expect_members(&served_links(&app).await, &["de", "en", "it"]);
}

#[sqlx::test]
async fn a_row_that_outgrows_its_page_moves_to_the_end(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = 60_000).await;
    let rows: Vec<String> = (0..40).map(|i| format!("r{i}")).collect();
    let plain: Vec<_> = rows
        .iter()
        .map(|path| (path.as_str(), images(2, path), Value::Null, None))
        .collect();
    insert(&app, &plain).await;
    assert_eq!(app.crawl().await.len(), 1, "forty small rows share a page");

    // r3 grows by 650 images (55 kB): page 1 cannot also hold that.
    sqlx::query("UPDATE sitemap_urls SET images = $2::jsonb WHERE loc = $1")
        .bind(loc("r3"))
        .bind(images(650, "big").to_string())
        .execute(&app.pool)
        .await
        .expect("grow");
    app.fold().await;
    let pages = app.crawl().await;
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert!(!pages[0].1.contains(&loc("r3")), "r3 left page 1");
    assert_eq!(pages[1].1, [loc("r3")], "and went to the end");
    let moved = app.page(&pages[1].0).await.urls;
    assert_eq!(moved[0].images.len(), 650);

    // Shrinking fits where it is.
    sqlx::query("UPDATE sitemap_urls SET images = NULL WHERE loc = $1")
        .bind(loc("r3"))
        .execute(&app.pool)
        .await
        .expect("shrink");
    app.fold().await;
    let pages = app.crawl().await;
    assert_eq!(pages[1].1, [loc("r3")], "a row moves only when it must");
}

/// A new row's loc is sized by the service as it places the row, and its
/// size against the page budget by the fold: both to the byte the schema's
/// `sitemap_entry_bytes` and `sitemap_media_bytes` give.
#[sqlx::test]
async fn new_rows_are_sized_to_the_byte_and_left_out_just_past_the_budget(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_bytes = 40_000).await;
    let budget: i64 = sqlx::query_scalar("SELECT entry_budget FROM sitemap_settings")
        .fetch_one(&app.pool)
        .await
        .expect("budget");
    let many = images(450, "m");
    let media: i32 = sqlx::query_scalar("SELECT sitemap_media_bytes($1::jsonb, NULL)")
        .bind(many.to_string())
        .fetch_one(&app.pool)
        .await
        .expect("media bytes");
    // Paths padded so that the entry, images included, takes the budget
    // exactly, and one byte more (its '&' written as five).
    let padded = |stem: &str, total: i64| {
        let room = total - i64::from(media) - entry_bytes(&loc(stem)) as i64;
        assert!(
            (1..2_000).contains(&room),
            "{stem}: {room} bytes left for padding"
        );
        format!("{stem}{}", "a".repeat(room as usize))
    };
    let fits = padded("fits-", budget);
    let over = padded("over-&", budget + 1);
    insert(
        &app,
        &[
            ("plain", Value::Null, Value::Null, None),
            ("caf\u{e9}-\u{1F600}", Value::Null, Value::Null, None),
            ("q?a=1&b='2'&c=3", Value::Null, Value::Null, None),
            ("with-images&x", images(3, "caf\u{e9}&x"), Value::Null, None),
            (&fits, many.clone(), Value::Null, None),
            (&over, many, Value::Null, None),
        ],
    )
    .await;

    let missized: Vec<(String, i32, i32)> = sqlx::query_as(
        "SELECT u.loc, p.bytes, sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos)
         FROM sitemap_placed p JOIN sitemap_urls u ON u.id = p.id
         WHERE p.page IS NOT NULL
           AND p.bytes <> sitemap_entry_bytes(u.loc) + sitemap_media_bytes(u.images, u.videos)",
    )
    .fetch_all(&app.pool)
    .await
    .expect("sizes");
    assert_eq!(missized, [], "each placed row reserves its size");
    let placed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sitemap_placed WHERE page IS NOT NULL")
            .fetch_one(&app.pool)
            .await
            .expect("placed");
    assert_eq!(placed, 5, "all but the row over the budget");
    let fitting: Option<i32> = sqlx::query_scalar(
        "SELECT p.bytes FROM sitemap_placed p JOIN sitemap_urls u ON u.id = p.id
         WHERE u.loc = $1 AND p.page IS NOT NULL",
    )
    .bind(loc(&fits))
    .fetch_optional(&app.pool)
    .await
    .expect("fitting row");
    assert_eq!(fitting.map(i64::from), Some(budget));
    let reason: Option<String> = sqlx::query_scalar(
        "SELECT p.skip_reason FROM sitemap_placements p JOIN sitemap_urls u ON u.id = p.id
         WHERE u.loc = $1",
    )
    .bind(loc(&over))
    .fetch_optional(&app.pool)
    .await
    .expect("row over the budget");
    assert_eq!(
        reason,
        Some(format!(
            "entry of {} bytes, over the page budget of {budget} (max_bytes less 1024)",
            budget + 1
        ))
    );
    let served: usize = app.crawl().await.iter().map(|(_, locs)| locs.len()).sum();
    assert_eq!(served, 5);
}

#[sqlx::test]
async fn reserved_bytes_bound_every_entry_as_written(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let mut odd = video("Caf\u{e9} \"quotes\" & 'apostrophes' \u{1F600}");
    odd["tags"] = json!(["a&b", "<c>", "\u{e9}t\u{e9}"]);
    insert(
        &app,
        &[
            ("v", Value::Null, json!([video("one"), odd]), None),
            ("i", images(3, "caf\u{e9}&x"), Value::Null, None),
            ("en/x", Value::Null, Value::Null, Some((&["en"], "x"))),
            (
                "de/x",
                Value::Null,
                Value::Null,
                Some((&["de", "x-default"], "x")),
            ),
        ],
    )
    .await;
    let (_, xml) = app.plain_page("/sitemap-1.xml").await;
    let xml = String::from_utf8(xml).expect("UTF-8");
    let reserved: BTreeMap<String, i32> = sqlx::query_as(
        "SELECT u.loc, p.bytes FROM sitemap_placed p JOIN sitemap_urls u ON u.id = p.id",
    )
    .fetch_all(&app.pool)
    .await
    .expect("placements")
    .into_iter()
    .collect();
    for entry in xml
        .split_inclusive("</url>\n")
        .filter(|e| e.contains("<url>"))
    {
        let entry = &entry[entry.find("<url>").expect("entry")..];
        let loc = &entry["<url><loc>".len()..entry.find("</loc>").expect("loc")];
        let reserved = reserved[loc] as usize;
        assert!(
            entry.len() <= reserved,
            "{loc}: {} > {reserved}",
            entry.len()
        );
        // The reservation is the entry at its longest: a full lastmod,
        // changefreq and priority, a rating and duration of five digits.
        assert!(
            reserved - entry.len() <= 125 + 2 * 10,
            "{loc}: {reserved} for {}",
            entry.len()
        );
    }
}

/// A new lastmod of rows placed alone (with images, videos or alternates)
/// changes their entries where they stand: their sizes are the same, so
/// their placements are not written again, and their page serves the new
/// lastmod.
#[sqlx::test]
async fn a_new_lastmod_leaves_the_placements_of_rows_placed_alone_unwritten(pool: PgPool) {
    // the test's folds, not the service's own on its interval
    let app = TestApp::spawn_with(pool, |s| s.fold_interval_ms = 3_600_000).await;
    insert(
        &app,
        &[
            ("i", images(2, "i"), Value::Null, None),
            ("v", Value::Null, json!([video("v")]), None),
            ("en/x", Value::Null, Value::Null, Some((&["en"], "x"))),
            ("de/x", Value::Null, Value::Null, Some((&["de"], "x"))),
        ],
    )
    .await;
    let placements = || {
        sqlx::query_as::<_, (i64, String, i32)>(
            "SELECT id, xmin::text, bytes FROM sitemap_placements ORDER BY id",
        )
        .fetch_all(&app.pool)
    };
    let before = placements().await.expect("placements");
    assert_eq!(before.len(), 4, "each row placed alone");

    crate::helpers::exec(
        &app.pool,
        "UPDATE sitemap_urls SET lastmod = '2026-03-04T05:06:07Z'",
    )
    .await;
    assert_eq!(app.fold().await, 4);
    assert_eq!(placements().await.expect("placements"), before);
    let urls = app.page("/sitemap-1.xml.gz").await.urls;
    assert_eq!(urls.len(), 4);
    assert!(
        urls.iter()
            .all(|u| u.lastmod.as_deref() == Some("2026-03-04T05:06:07+00:00")),
        "{urls:?}"
    );

    // A size that changes is still written.
    sqlx::query("UPDATE sitemap_urls SET images = $2::jsonb WHERE loc = $1")
        .bind(loc("i"))
        .bind(images(3, "i").to_string())
        .execute(&app.pool)
        .await
        .expect("an image more");
    app.fold().await;
    let after = placements().await.expect("placements");
    let grown = |rows: &[(i64, String, i32)]| rows.iter().find(|r| r.0 == before[0].0).cloned();
    assert!(grown(&after).expect("i").2 > before[0].2, "{after:?}");
    assert_eq!(after[1..], before[1..]);
}

/// Extension values each way in (the service's validator, the schema's
/// CHECK) refuses, with the field each names.
fn refused_cases() -> Vec<(&'static str, Value, &'static str)> {
    let mut no_title = video("x");
    no_title.as_object_mut().expect("object").remove("title");
    let mut long_description = video("x");
    long_description["description"] = json!("d".repeat(2049));
    let mut own_loc = video("x");
    own_loc["content_loc"] = json!(loc("page"));
    let mut long_duration = video("x");
    long_duration["duration"] = json!(28_801);
    let mut high_rating = video("x");
    high_rating["rating"] = json!(5.1);
    let mut many_tags = video("x");
    many_tags["tags"] = json!((0..33).map(|i| format!("t{i}")).collect::<Vec<_>>());
    let mut bad_country = video("x");
    bad_country["restriction"] = json!({ "relationship": "allow", "countries": ["UK"] });
    let mut bad_relationship = video("x");
    bad_relationship["platform"] = json!({ "relationship": "maybe", "platforms": ["web"] });
    let mut foreign_uploader = video("x");
    foreign_uploader["uploader"] =
        json!({ "name": "me", "info": "https://elsewhere.example.org/me" });
    let mut deprecated = video("x");
    deprecated["category"] = json!("cooking");
    let mut neither = video("x");
    let object = neither.as_object_mut().expect("object");
    object.remove("content_loc");
    object.remove("player_loc");
    vec![
        ("images", images(1001, "x"), "images"),
        (
            "images",
            json!([{ "loc": "ftp://cdn.example.net/x.jpg" }]),
            "images[0].loc",
        ),
        (
            "images",
            json!([{ "loc": "https://cdn.example.net/x.jpg", "caption": "c" }]),
            "images[0].caption",
        ),
        ("videos", json!([no_title]), "videos[0].title"),
        ("videos", json!([long_description]), "videos[0].description"),
        ("videos", json!([own_loc]), "videos[0].content_loc"),
        ("videos", json!([neither]), "videos[0].content_loc"),
        ("videos", json!([long_duration]), "videos[0].duration"),
        ("videos", json!([high_rating]), "videos[0].rating"),
        ("videos", json!([many_tags]), "videos[0].tags"),
        (
            "videos",
            json!([bad_country]),
            "videos[0].restriction.countries",
        ),
        (
            "videos",
            json!([bad_relationship]),
            "videos[0].platform.relationship",
        ),
        (
            "videos",
            json!([foreign_uploader]),
            "videos[0].uploader.info",
        ),
        ("videos", json!([deprecated]), "videos[0].category"),
        (
            "news",
            json!({ "publication_name": "P", "language": "xx", "publication_date": "2024-01-01", "title": "T" }),
            "news.language",
        ),
        (
            "news",
            json!({ "publication_name": "P", "language": "en", "publication_date": "2999-01-01", "title": "T" }),
            "news.publication_date",
        ),
        (
            "news",
            json!({ "publication_name": "P", "language": "en", "publication_date": "2024-01-01" }),
            "news.title",
        ),
    ]
}

#[sqlx::test]
async fn the_schema_and_the_validator_refuse_the_same_values_naming_the_field(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let sites = Config::new(app.settings.clone()).expect("config").sites;
    let validator = Validator::new(&sites, "default", "", OffsetDateTime::now_utc());
    for (column, value, field) in refused_cases() {
        let mut raw = RawRecord {
            loc: Some(loc("page")),
            ..RawRecord::default()
        };
        match column {
            "images" => raw.images = Some(value.clone()),
            "videos" => raw.videos = Some(value.clone()),
            _ => raw.news = Some(value.clone()),
        }
        let errors = validator.validate(&raw).expect_err(field);
        assert!(
            errors.iter().any(|e| e.field == field),
            "validator on {field}: {errors:?}"
        );
        let refused = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO sitemap_urls (loc, {column}) VALUES ($1, $2::jsonb)"
        )))
        .bind(loc("page"))
        .bind(value.to_string())
        .execute(&app.pool)
        .await
        .expect_err(field)
        .to_string();
        assert!(
            refused.contains(&format!("sitemap_urls.{field} ")),
            "schema on {field}: {refused}"
        );
    }
    for (hreflang, valid) in [
        ("de-AT", true),
        ("x-default", true),
        ("en-UK", false),
        ("xx", false),
    ] {
        let raw = RawRecord {
            loc: Some(loc("page")),
            alternates: Some(json!([{ "hreflang": hreflang, "href": loc("page") }])),
            ..RawRecord::default()
        };
        assert_eq!(
            validator.validate(&raw).is_ok(),
            valid,
            "validator on {hreflang}"
        );
        let stored = sqlx::query(
            "INSERT INTO sitemap_urls (loc, hreflang, hreflang_cluster) VALUES ($1, ARRAY[$2], 'c')",
        )
        .bind(loc(&format!("h/{hreflang}")))
        .bind(hreflang)
        .execute(&app.pool)
        .await;
        assert_eq!(stored.is_ok(), valid, "schema on {hreflang}: {stored:?}");
    }
}

#[sqlx::test]
async fn the_api_takes_and_returns_extensions(pool: PgPool) {
    let app = spawn_api(pool, |_| {}).await;
    let cluster = json!([
        { "hreflang": "en", "href": loc("en/a") },
        { "hreflang": "de", "href": loc("de/a") },
        { "hreflang": "x-default", "href": loc("en/a") },
    ]);
    let (status, body) = put(
        &app,
        json!([
            { "loc": loc("en/a"), "alternates": cluster, "images": images(2, "a"),
              "videos": [video("A")] },
            { "loc": loc("de/a"), "alternates": cluster },
        ]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let response = app
        .send(
            Method::GET,
            &format!("/api/v1/urls?loc={}", loc("en/a")),
            &[(
                "authorization",
                &format!("Bearer {}", crate::write_api::TOKEN),
            )],
            "",
        )
        .await;
    let record: Value = response.json_value().await;
    assert_eq!(record["images"], images(2, "a"), "{record}");
    assert_eq!(record["videos"][0]["title"], "A");
    let served: BTreeSet<(String, String)> = record["alternates"]
        .as_array()
        .expect("alternates")
        .iter()
        .map(|a| {
            (
                a["hreflang"].as_str().unwrap_or_default().to_owned(),
                a["href"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(served.len(), 3, "{record}");
    let links = served_links(&app).await;
    assert_eq!(
        links[&loc("de/a")],
        served,
        "both members serve the whole cluster"
    );

    let (status, problem) = put(
        &app,
        json!([{ "loc": loc("b"), "videos": [{ "title": "no thumbnail" }],
                 "alternates": [{ "hreflang": "de", "href": loc("other") }] }]),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    let fields: BTreeSet<&str> = problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    for field in [
        "videos[0].thumbnail_loc",
        "videos[0].description",
        "alternates",
    ] {
        assert!(fields.contains(field), "{field} in {problem}");
    }

    // A member elsewhere is a row of its own, never a link no row backs.
    let (status, problem) = put(
        &app,
        json!([{ "loc": loc("c"), "alternates": [
            { "hreflang": "en", "href": loc("c") },
            { "hreflang": "de", "href": "https://www.example.de/c" },
        ] }]),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(
        problem["errors"][0]["field"], "alternates[1].href",
        "{problem}"
    );
}

#[sqlx::test]
async fn stats_and_metrics_count_extensions_and_report_cluster_problems(pool: PgPool) {
    let app = spawn_api(pool, |s| s.max_urls = 2).await;
    insert(
        &app,
        &[
            (
                "a",
                images(3, "a"),
                json!([video("A"), video("B")]),
                Some((&["en"], "good")),
            ),
            (
                "b",
                images(1, "b"),
                Value::Null,
                Some((&["de", "x-default"], "good")),
            ),
            ("c", Value::Null, Value::Null, Some((&["fr"], "clash"))),
            ("d", Value::Null, Value::Null, Some((&["fr"], "clash"))),
        ],
    )
    .await;
    sqlx::query("INSERT INTO sitemap_urls (loc, news) VALUES ($1, $2::jsonb)")
        .bind(loc("article"))
        .bind(
            json!({ "publication_name": "P", "language": "en", "title": "T",
                    "publication_date": OffsetDateTime::now_utc().date().to_string() })
            .to_string(),
        )
        .execute(&app.pool)
        .await
        .expect("an article");
    app.fold().await;
    let stats = crate::write_api::site_stats(&app).await;
    // Page 1 holds a and b: 4 images, 2 videos, and each of the two members
    // links all three hreflangs of its cluster.
    let site = &stats["sites"][0];
    assert_eq!(
        site["extensions"],
        json!({ "images": 4, "videos": 2, "alternates": 6 }),
        "{stats}"
    );
    let pages = &site["sections"][0]["pages"];
    assert_eq!(pages[0]["extensions"], site["extensions"], "{stats}");
    assert_eq!(
        pages[1]["extensions"],
        json!({ "images": 0, "videos": 0, "alternates": 0 }),
        "the clashing cluster serves no links"
    );
    assert_eq!(site["news_articles"], 1, "{stats}");
    assert_eq!(stats["hreflang"]["clusters"], 2, "{stats}");
    assert_eq!(stats["hreflang"]["with_problems"], 1, "{stats}");
    assert_eq!(stats["hreflang"]["problems"][0]["cluster"], "clash");
    let problem = stats["hreflang"]["problems"][0]["problem"]
        .as_str()
        .unwrap_or_default();
    assert!(
        problem.contains("hreflang fr is claimed by more than one URL"),
        "{problem}"
    );

    let metrics = app.metrics().await.text().await.expect("metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l == "sitemapd_hreflang_cluster_problems 1"),
        "{metrics}"
    );
}
