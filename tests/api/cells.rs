//! Cells: several PostgreSQL primaries, each holding a set of sites, behind
//! one nginx that sends each host to its cell (`config/nginx-cells.conf`),
//! and sites moving between them while both serve.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::json;
use sqlx::PgPool;

use crate::clusters::Cluster;
use crate::helpers::{TestApp, exec, gunzip};
use crate::proxy::Nginx;
use crate::write_api::{TOKEN, spawn_api};

/// Runs `sitemapd` on `cluster`'s database, off the test's thread (the
/// services run on it, and commands take turns with their folds).
async fn sitemapd(cluster: &Cluster, home: &str, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sitemapd"));
    command
        .args(args)
        .env("DATABASE_URL", cluster.url("sitemapd"))
        .env("SITEMAPD_BASE_URL", home)
        .env("RUST_LOG", "warn");
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("sitemapd runs")
}

/// The cell's entries of the proxy's map, as `sites list` prints them.
async fn nginx_map(cluster: &Cluster, home: &str, upstream: &str) -> String {
    let listed = sitemapd(
        cluster,
        home,
        &[
            "sites",
            "list",
            "--format",
            "nginx-map",
            "--upstream",
            upstream,
        ],
    )
    .await;
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    String::from_utf8(listed.stdout).expect("text")
}

/// nginx running the sample cells config over two services, each answer
/// naming the cell it came from (`X-Cell`).
async fn cells_behind_nginx(apps: [&TestApp; 2], maps: [&str; 2]) -> Nginx {
    let (a, b) = (apps[0].addr, apps[1].addr);
    Nginx::run_sample_reloadable(
        "config/nginx-cells.conf",
        &[("cell_a.map", maps[0].to_owned()), ("cell_b.map", maps[1].to_owned())],
        |sample, port, dir| {
            sample
                .replace("server sitemapd-a:8080;", &format!("server {a};"))
                .replace("server sitemapd-b:8080;", &format!("server {b};"))
                .replace("/etc/nginx/sitemapd-cells/", &format!("{}/", dir.display()))
                .replace("listen 8081;", &format!("listen 127.0.0.1:{port};"))
                .replace(
                    "proxy_set_header Host $host;",
                    "proxy_set_header Host $host;\n            add_header X-Cell $sitemapd_cell always;",
                )
        },
    )
    .await
}

/// One client for every request: building one costs milliseconds of the
/// thread the services run on.
static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(crate::helpers::client);

/// GETs `path` of `host` through nginx: the status, the cell that
/// answered, and the body (gunzipped). A connection nginx drops as it reloads is tried again, as crawlers do.
async fn through(nginx_port: u16, host: &str, path: &str) -> (u16, String, Vec<u8>) {
    let mut tries = 0;
    let response = loop {
        tries += 1;
        match CLIENT
            .get(format!("http://127.0.0.1:{nginx_port}{path}"))
            .header("host", host)
            .send()
            .await
        {
            Ok(response) => break response,
            Err(error) if tries < 3 && !error.is_status() => continue,
            Err(error) => panic!("nginx answers: {error}"),
        }
    };
    let status = response.status().as_u16();
    let cell = response
        .headers()
        .get("x-cell")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = response.bytes().await.expect("body").to_vec();
    let body = if body.starts_with(&[0x1f, 0x8b]) {
        gunzip(&body)
    } else {
        body
    };
    (status, cell, body)
}

fn locs_of(xml: &[u8]) -> Vec<String> {
    let xml = std::str::from_utf8(xml).expect("UTF-8");
    xml.split("<loc>")
        .skip(1)
        .map(|rest| rest.split_once("</loc>").expect("closed loc").0.to_owned())
        .collect()
}

/// A crawl of `host`'s sitemaps through nginx: the cells that answered,
/// and every loc of every page its index lists, as often as served.
async fn crawl(nginx_port: u16, host: &str) -> (BTreeSet<String>, Vec<String>) {
    let mut cells = BTreeSet::new();
    let (status, cell, index) = through(nginx_port, host, "/sitemap_index.xml").await;
    assert_eq!(status, 200, "{host}: {}", String::from_utf8_lossy(&index));
    cells.insert(cell);
    let mut locs = Vec::new();
    for page in locs_of(&index) {
        let path = page
            .strip_prefix(&format!("https://{host}"))
            .unwrap_or_else(|| panic!("{page} is not on {host}"));
        let (status, cell, xml) = through(nginx_port, host, path).await;
        assert_eq!(status, 200, "{page}");
        cells.insert(cell);
        locs.extend(locs_of(&xml));
    }
    (cells, locs)
}

/// Each host goes to the replicas of the cell that holds its site, by the
/// map `sitemapd sites list --format nginx-map` writes from each cell's
/// database into the sample `config/nginx-cells.conf`.
#[tokio::test]
async fn nginx_sends_each_host_to_the_cell_that_holds_its_site() {
    let cells = [Cluster::primary(), Cluster::primary()];
    let mut apps = Vec::new();
    let mut maps = Vec::new();
    for (cell, (cluster, (upstream, sites))) in cells
        .iter()
        .zip([("cell_a", &["a", "b"][..]), ("cell_b", &["c"][..])])
        .enumerate()
    {
        let pool = cluster.migrated("sitemapd").await;
        let home = format!("https://home{cell}.example.com/");
        let app = TestApp::spawn_with(pool.clone(), |s| s.base_url = home.clone()).await;
        for site in sites {
            exec(
                &pool,
                &format!(
                    "INSERT INTO sitemap_sites (site, origin, path_prefix)
                     VALUES ('{site}', 'https://{site}.example.com', '/');
                     INSERT INTO sitemap_urls (site, loc) VALUES ('{site}', 'https://{site}.example.com/p')"
                ),
            )
            .await;
        }
        app.fold().await;
        let map = nginx_map(cluster, &home, upstream).await;
        let mut entries: Vec<&str> = map.lines().filter(|l| !l.starts_with('#')).collect();
        entries.sort_unstable();
        let mut expected: Vec<String> = sites
            .iter()
            .map(|site| format!("\"{site}.example.com\" {upstream};"))
            .chain([format!("\"home{cell}.example.com\" {upstream};")])
            .collect();
        expected.sort_unstable();
        assert_eq!(entries, expected);
        maps.push(map);
        apps.push(app);
    }

    let nginx = cells_behind_nginx([&apps[0], &apps[1]], [&maps[0], &maps[1]]).await;
    for (host, cell) in [
        ("a.example.com", "cell_a"),
        ("b.example.com", "cell_a"),
        ("c.example.com", "cell_b"),
        ("home1.example.com", "cell_b"),
    ] {
        let (status, answered, robots) = through(nginx.port(), host, "/robots.txt").await;
        let robots = String::from_utf8(robots).expect("text");
        assert_eq!((status, answered.as_str()), (200, cell), "{host}: {robots}");
        assert!(
            robots.contains(&format!("Sitemap: https://{host}/sitemap_index.xml")),
            "{host}: {robots}"
        );
    }
    let (_, locs) = crawl(nginx.port(), "c.example.com").await;
    assert_eq!(locs, ["https://c.example.com/p"]);
    assert_eq!(
        through(nginx.port(), "nowhere.example.com", "/robots.txt")
            .await
            .0,
        404,
        "no cell holds it"
    );
}

const SITES: usize = 1_000;
const MOVED: &str = "s0000";
const MOVED_HOST: &str = "s0000.example.com";
/// The moved site's rows before the writers start: its bulk and its `/p`s.
const MOVED_ROWS: usize = 3_000 + 3;

/// Which cell holds site `i` before the move: even on cell_a, odd on cell_b.
fn site_name(i: usize) -> String {
    format!("s{i:04}")
}

/// Writes the moved site's rows with plain SQL to the cell `current` names,
/// as an application would, until `stop`: adds rows, changes them and
/// deletes some. Returns the locs it added and did not delete (each write
/// acknowledged by a commit), the writes each cell took, and how many the
/// move refused.
async fn write_until(
    pools: [PgPool; 2],
    current: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> (BTreeSet<String>, [usize; 2], usize) {
    let mut kept = BTreeSet::new();
    let mut taken = [0; 2];
    let mut refused = 0;
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let cell = current.load(Ordering::SeqCst);
        let pool = &pools[cell];
        let loc = format!("https://{MOVED_HOST}/w{n}");
        let oldest = kept.iter().next().cloned();
        let (written, wrote) = match (n % 4, oldest) {
            (3, Some(oldest)) => (
                sqlx::query("DELETE FROM sitemap_urls WHERE site = $1 AND loc = $2")
                    .bind(MOVED)
                    .bind(&oldest)
                    .execute(pool)
                    .await,
                Err(oldest),
            ),
            (2, Some(oldest)) => (
                sqlx::query("UPDATE sitemap_urls SET lastmod = now() WHERE site = $1 AND loc = $2")
                    .bind(MOVED)
                    .bind(&oldest)
                    .execute(pool)
                    .await,
                Ok(None),
            ),
            _ => (
                sqlx::query("INSERT INTO sitemap_urls (site, loc) VALUES ($1, $2)")
                    .bind(MOVED)
                    .bind(&loc)
                    .execute(pool)
                    .await,
                Ok(Some(loc)),
            ),
        };
        match written {
            Ok(_) => {
                taken[cell] += 1;
                match wrote {
                    Ok(Some(added)) => {
                        kept.insert(added);
                    }
                    Ok(None) => {}
                    Err(deleted) => {
                        kept.remove(&deleted);
                    }
                }
            }
            Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some("SD001") => {
                assert!(error.message().contains(MOVED), "{}", error.message());
                refused += 1;
            }
            Err(error) => panic!("a write failed: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (kept, taken, refused)
}

/// The cells' rows of each site, sorted, with each site's cell.
async fn rows_by_site(pools: &[PgPool; 2]) -> Vec<(String, usize, Vec<String>)> {
    let mut rows = Vec::new();
    for (cell, pool) in pools.iter().enumerate() {
        let sites: Vec<(String, Vec<String>)> = sqlx::query_as(
            "SELECT s.site, coalesce(array_agg(u.loc ORDER BY u.loc) FILTER (WHERE u.loc IS NOT NULL), '{}')
             FROM sitemap_sites s LEFT JOIN sitemap_urls u ON u.site = s.site
             WHERE s.site <> 'default' GROUP BY s.site",
        )
        .fetch_all(pool)
        .await
        .expect("rows by site");
        rows.extend(sites.into_iter().map(|(site, mut locs)| {
            locs.sort();
            (site, cell, locs)
        }));
    }
    rows.sort();
    rows
}

/// Two cells behind nginx hold 1,000 sites; one site moves from one to the
/// other while an application keeps writing it and a crawler keeps reading
/// it. Every crawl finds every URL once; no acknowledged write is lost; the
/// source refuses the site's writes once it has moved, naming the other
/// cell; and a crawl of every site after finds exactly its cell's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_moves_between_cells_while_written_and_crawled() {
    let clusters = [Cluster::primary(), Cluster::primary()];
    let pools = [
        clusters[0].migrated("sitemapd").await,
        clusters[1].migrated("sitemapd").await,
    ];
    let homes = ["https://home0.example.com/", "https://home1.example.com/"];
    let mut apps = Vec::new();
    for (cell, pool) in pools.iter().enumerate() {
        exec(
            pool,
            &format!(
                "INSERT INTO sitemap_sites (site, origin, path_prefix)
                 SELECT 's' || lpad(g::text, 4, '0'), 'https://s' || lpad(g::text, 4, '0') || '.example.com', '/'
                 FROM generate_series({cell}, {last}, 2) g;
                 INSERT INTO sitemap_urls (site, loc)
                 SELECT s.site, s.origin || '/p' || i FROM sitemap_sites s, generate_series(1, 3) i;
                 INSERT INTO sitemap_urls (site, loc, lastmod, images)
                 SELECT site, origin || '/bulk/' || g, now() - g * interval '1 minute',
                        CASE WHEN g % 10 = 0
                             THEN jsonb_build_array(jsonb_build_object('loc', origin || '/i' || g || '.png')) END
                 FROM sitemap_sites, generate_series(1, 3000) g WHERE site = '{MOVED}'",
                last = SITES - 1
            ),
        )
        .await;
        let home = homes[cell];
        let app = spawn_api(pool.clone(), |s| s.base_url = home.to_owned()).await;
        app.fold().await;
        apps.push(app);
    }
    let map_a = nginx_map(&clusters[0], homes[0], "cell_a").await;
    let map_b = nginx_map(&clusters[1], homes[1], "cell_b").await;
    assert!(
        map_a.contains(&format!("\"{MOVED_HOST}\" cell_a;")),
        "{map_a}"
    );
    let nginx = cells_behind_nginx([&apps[0], &apps[1]], [&map_a, &map_b]).await;
    let port = nginx.port();

    let current = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_until(pools.clone(), current.clone(), stop.clone()));
    let crawling = Arc::new(AtomicBool::new(true));
    let crawler = tokio::spawn({
        let crawling = crawling.clone();
        async move {
            let mut crawls = Vec::new();
            // After the switch, crawls go on until one has met the target
            // cell (a few at most): a slow machine's crawl can outlast the
            // time the test gives it.
            let mut after_the_switch = 0;
            loop {
                let switched = !crawling.load(Ordering::SeqCst);
                if switched {
                    after_the_switch += 1;
                }
                let (cells, locs) = crawl(port, MOVED_HOST).await;
                let unique: BTreeSet<&String> = locs.iter().collect();
                assert_eq!(unique.len(), locs.len(), "a URL served twice in one crawl");
                for i in 1..=3000 {
                    assert!(
                        unique.contains(&format!("https://{MOVED_HOST}/bulk/{i}")),
                        "bulk/{i} missing from a crawl ({cells:?})"
                    );
                }
                let met_the_target = cells.contains("cell_b");
                crawls.push(cells);
                if switched && (met_the_target || after_the_switch == 10) {
                    break;
                }
            }
            crawls
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let target = clusters[1].url("sitemapd");
    let moved = sitemapd(
        &clusters[0],
        homes[0],
        &[
            "sites",
            "move",
            MOVED,
            "--to",
            &target,
            "--upstream",
            "cell_b",
        ],
    )
    .await;
    let printed = String::from_utf8_lossy(&moved.stdout).into_owned();
    assert!(
        moved.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    assert!(
        printed.contains(&format!("\"{MOVED_HOST}\" cell_b;")),
        "{printed}"
    );
    assert!(printed.contains("into the switch: both hold"), "{printed}");

    // Until the proxy switches, the source refuses the site's writes, by
    // SQL and by the write API, naming the site and where it went.
    let refused = sqlx::query("INSERT INTO sitemap_urls (site, loc) VALUES ($1, $2)")
        .bind(MOVED)
        .bind(format!("https://{MOVED_HOST}/refused"))
        .execute(&pools[0])
        .await
        .expect_err("refused");
    let refused = refused.as_database_error().expect("from the database");
    assert_eq!(refused.code().as_deref(), Some("SD001"));
    assert!(
        refused.message().contains("has moved to another cell")
            && refused.message().contains(&target),
        "{}",
        refused.message()
    );
    let response = apps[0]
        .send(
            Method::PUT,
            "/api/v1/urls",
            &[
                ("content-type", "application/json"),
                ("authorization", &format!("Bearer {TOKEN}")),
            ],
            json!([{"site": MOVED, "loc": format!("https://{MOVED_HOST}/api")}]).to_string(),
        )
        .await;
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let problem: serde_json::Value = response.json().await.expect("a problem document");
    assert_eq!(
        problem["type"], "urn:sitemapd:problem:site-moving",
        "{problem}"
    );

    // The proxy switches: both maps again, and a reload.
    let map_a = nginx_map(&clusters[0], homes[0], "cell_a").await;
    let map_b = nginx_map(&clusters[1], homes[1], "cell_b").await;
    assert!(!map_a.contains(MOVED_HOST), "{map_a}");
    assert!(
        map_b.contains(&format!("\"{MOVED_HOST}\" cell_b;")),
        "{map_b}"
    );
    nginx.reload(&[("cell_a.map", map_a), ("cell_b.map", map_b)]);
    let switching = Instant::now();
    while through(port, MOVED_HOST, "/robots.txt").await.1 != "cell_b" {
        assert!(
            switching.elapsed() < Duration::from_secs(10),
            "nginx did not reload"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    current.store(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    crawling.store(false, Ordering::SeqCst);
    let crawls = crawler.await.expect("every crawl whole");
    stop.store(true, Ordering::SeqCst);
    let (kept, taken, refused_writes) = writer.await.expect("the writer");
    assert!(
        taken[0] > 0 && taken[1] > 0,
        "writes on both sides of the move: {taken:?}"
    );
    assert!(
        crawls.iter().any(|cells| cells.contains("cell_a"))
            && crawls.iter().any(|cells| cells.contains("cell_b")),
        "crawled on both sides of the switch: {crawls:?}"
    );
    eprintln!(
        "{} crawls; writes taken by each cell {taken:?}, {refused_writes} refused, {} rows kept",
        crawls.len(),
        kept.len()
    );

    let finished = sitemapd(
        &clusters[0],
        homes[0],
        &["sites", "move", MOVED, "--to", &target, "--finish"],
    )
    .await;
    assert!(
        finished.status.success(),
        "{}",
        String::from_utf8_lossy(&finished.stderr)
    );
    for app in &apps {
        app.fold().await;
    }

    // Every acknowledged write is in the target; nothing is left on the
    // source.
    let rows = rows_by_site(&pools).await;
    assert_eq!(rows.len(), SITES, "each site in one cell");
    let (_, cell, moved_rows) = rows.iter().find(|(site, ..)| site == MOVED).expect("moved");
    assert_eq!(*cell, 1);
    let written: Vec<&String> = moved_rows.iter().filter(|loc| loc.contains("/w")).collect();
    assert_eq!(
        written,
        kept.iter().collect::<Vec<_>>(),
        "acknowledged writes"
    );
    assert_eq!(moved_rows.len(), MOVED_ROWS + kept.len());

    // A crawl of every site through nginx finds exactly its cell's rows.
    let crawled: Vec<(String, Vec<String>, String)> = futures_util::stream::iter(0..SITES)
        .map(|i| async move {
            let host = format!("{}.example.com", site_name(i));
            let (cells, mut locs) = crawl(port, &host).await;
            locs.sort();
            let cells: Vec<String> = cells.into_iter().collect();
            (site_name(i), locs, cells.join(","))
        })
        .buffered(8)
        .collect()
        .await;
    for ((site, cell, locs), (crawled_site, crawled_locs, crawled_cell)) in
        rows.iter().zip(&crawled)
    {
        assert_eq!(site, crawled_site);
        assert_eq!(crawled_cell, ["cell_a", "cell_b"][*cell], "{site}");
        assert_eq!(crawled_locs, locs, "{site}");
    }
}

/// What a move refuses, and how it is undone: a site sharing its host with
/// another, a switch held up by an open transaction (writes are taken
/// again), a site the target has already; `--abort` leaves the cells as
/// they were, and a finished move can be made back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_refuses_what_would_split_or_lose_a_site_and_can_be_undone() {
    let cluster = Cluster::primary();
    let (a, b) = (
        cluster.migrated("sitemapd").await,
        cluster.migrated("target").await,
    );
    let home = "https://home.example.com/";
    exec(
        &a,
        "INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES
             ('solo', 'https://solo.example.com', '/'),
             ('left', 'https://shared.example.com', '/l/'),
             ('right', 'https://shared.example.com', '/r/');
         INSERT INTO sitemap_urls (site, loc)
         SELECT 'solo', 'https://solo.example.com/' || g FROM generate_series(1, 10) g",
    )
    .await;
    let target = cluster.url("target");
    let to = || target.clone();
    let run = |args: Vec<&'static str>, to: String| move_site(&cluster, home, args, to);

    let (code, said) = run(vec!["left", "--upstream", "cell_b"], to()).await;
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("shares host shared.example.com with right"),
        "{said}"
    );

    // A transaction open on the source from before the switch holds it up.
    let mut open = a.begin().await.expect("a transaction");
    sqlx::query(
        "INSERT INTO sitemap_urls (site, loc) VALUES ('left', 'https://shared.example.com/l/x')",
    )
    .execute(&mut *open)
    .await
    .expect("written");
    let (code, said) = run(
        vec!["solo", "--upstream", "cell_b", "--switch-wait-s", "1"],
        to(),
    )
    .await;
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("are still open") && said.contains("pid "),
        "{said}"
    );
    open.rollback().await.expect("rolled back");
    insert_solo(&a, "taken-again")
        .await
        .expect("the source takes writes again");
    let refused = insert_solo(&b, "early")
        .await
        .expect_err("the target refuses them");
    assert!(
        refused
            .to_string()
            .contains("site solo is arriving from another cell"),
        "{refused}"
    );

    let (code, said) = run(vec!["solo", "--abort"], to()).await;
    assert_eq!(code, Some(0), "{said}");
    let left_on_target: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sitemap_urls WHERE site = 'solo'),
                (SELECT count(*) FROM sitemap_sites WHERE site = 'solo'),
                (SELECT count(*) FROM sitemap_site_moves)",
    )
    .fetch_one(&b)
    .await
    .expect("the target");
    assert_eq!(left_on_target, (0, 0, 0));
    insert_solo(&a, "after-abort")
        .await
        .expect("the source takes writes");

    exec(
        &b,
        "INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES ('solo', 'https://other.example.com', '/')",
    )
    .await;
    let (code, said) = run(vec!["solo", "--upstream", "cell_b"], to()).await;
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("exists on the target"), "{said}");
    exec(&b, "DELETE FROM sitemap_sites WHERE site = 'solo'").await;

    let (code, said) = run(vec!["solo", "--upstream", "cell_b"], to()).await;
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("both hold 12 rows") && said.contains("serve 12 entries, 0 left out"),
        "{said}"
    );
    let (code, said) = run(vec!["solo", "--finish"], to()).await;
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("its 12 URL rows deleted"), "{said}");

    // And back: the source's record of the finished move does not stand in
    // the way.
    let mut back = std::process::Command::new(env!("CARGO_BIN_EXE_sitemapd"));
    back.args([
        "sites",
        "move",
        "solo",
        "--to",
        &cluster.url("sitemapd"),
        "--upstream",
        "cell_a",
    ])
    .env("DATABASE_URL", &target)
    .env("SITEMAPD_BASE_URL", home)
    .env("RUST_LOG", "warn");
    let back = tokio::task::spawn_blocking(move || back.output())
        .await
        .expect("joined")
        .expect("sitemapd runs");
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_urls WHERE site = 'solo'")
        .fetch_one(&a)
        .await
        .expect("rows back");
    assert_eq!(rows, 12);
    insert_solo(&a, "back")
        .await
        .expect("the site's writes are taken where it is");
}

/// `sitemapd sites move ARGS --to TO` on `cluster`'s database: its exit
/// code, and what it printed.
async fn move_site(
    cluster: &Cluster,
    home: &str,
    args: Vec<&'static str>,
    to: String,
) -> (Option<i32>, String) {
    let mut all = vec!["sites", "move"];
    all.extend(args);
    all.extend(["--to", &to]);
    let out = sitemapd(cluster, home, &all).await;
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

async fn insert_solo(pool: &PgPool, path: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO sitemap_urls (site, loc) VALUES ('solo', $1)")
        .bind(format!("https://solo.example.com/{path}"))
        .execute(pool)
        .await
        .map(drop)
}
