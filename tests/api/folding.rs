//! Writes that never wait: applications' transactions of any length hold no
//! lock anyone else needs, folds place what they commit (one at a time,
//! surviving a kill), and every page invariant holds under concurrency.

use std::collections::HashMap;
use std::time::Duration;

use sitemapd::store::Turn;
use sqlx::PgPool;

use crate::helpers::{BASE_URL, TestApp, exec};

/// How long any one statement may take before the test calls it blocked:
/// far above what an unblocked write here takes, far below the long
/// transaction's 10 s.
const UNBLOCKED: Duration = Duration::from_secs(5);

/// A fold's memory bound, as the service's default (`fold_memory_bytes`).
const FOLD_MEMORY: u64 = 48 << 20;
#[sqlx::test]
async fn a_long_transaction_makes_no_other_writer_wait(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 10).await;
    app.insert_urls("x", "x/", 25).await;
    app.insert_urls("y", "y/", 5).await;

    // Inserted, updated (on page 1) and deleted rows of section x, held
    // open for 10 s.
    let mut long = app.pool.begin().await.expect("begin");
    for sql in [
        format!("INSERT INTO sitemap_urls (section, loc) VALUES ('x', '{BASE_URL}x/long')"),
        format!("UPDATE sitemap_urls SET lastmod = now() WHERE loc = '{BASE_URL}x/1'"),
        format!("DELETE FROM sitemap_urls WHERE loc = '{BASE_URL}x/2'"),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *long)
            .await
            .expect("long transaction's write");
    }
    let held_until = tokio::time::Instant::now() + Duration::from_secs(10);

    let others = [
        format!("INSERT INTO sitemap_urls (section, loc) VALUES ('x', '{BASE_URL}x/other')"),
        format!("UPDATE sitemap_urls SET lastmod = now() WHERE loc = '{BASE_URL}x/3'"),
        format!("UPDATE sitemap_urls SET loc = '{BASE_URL}x/3b' WHERE loc = '{BASE_URL}x/4'"),
        format!("DELETE FROM sitemap_urls WHERE loc = '{BASE_URL}x/5'"),
        format!("INSERT INTO sitemap_urls (section, loc) VALUES ('y', '{BASE_URL}y/other')"),
        format!("UPDATE sitemap_urls SET priority = 0.5 WHERE loc = '{BASE_URL}y/1'"),
        format!("DELETE FROM sitemap_urls WHERE loc = '{BASE_URL}y/2'"),
        format!(
            "INSERT INTO sitemap_urls (section, loc) VALUES ('x', '{BASE_URL}x/upsert')
             ON CONFLICT (site, loc) DO UPDATE SET lastmod = now()"
        ),
    ];
    for sql in &others {
        tokio::time::timeout(UNBLOCKED, exec(&app.pool, sql))
            .await
            .unwrap_or_else(|_| panic!("waited on the long transaction: {sql}"));
    }
    for section in ["x", "y"] {
        let copy = async {
            let mut conn = app.pool.acquire().await.expect("connection");
            let mut copy = conn
                .copy_in_raw("COPY sitemap_urls (section, loc) FROM STDIN")
                .await
                .expect("copy");
            let rows: String = (0..100)
                .map(|i| format!("{section}\t{BASE_URL}{section}/copied/{i}\n"))
                .collect();
            copy.send(rows.into_bytes()).await.expect("copy rows");
            copy.finish().await.expect("copy done")
        };
        tokio::time::timeout(UNBLOCKED, copy)
            .await
            .unwrap_or_else(|_| panic!("COPY into {section} waited on the long transaction"));
    }
    // Placement of the other writers' rows does not wait either.
    tokio::time::timeout(UNBLOCKED, app.fold())
        .await
        .expect("a fold waited on the long transaction");
    let served = app.served_locs().await;
    for loc in [
        "x/other",
        "x/3b",
        "y/other",
        "x/upsert",
        "x/copied/99",
        "y/copied/0",
    ] {
        assert!(served.contains(&format!("{BASE_URL}{loc}")), "{loc} served");
    }
    assert!(!served.contains(&format!("{BASE_URL}x/long")));
    assert!(
        tokio::time::Instant::now() < held_until,
        "everything above finished while the long transaction was open"
    );
    tokio::time::sleep_until(held_until).await;
    long.commit().await.expect("commit");
    app.fold().await;
    let served = app.served_locs().await;
    assert!(served.contains(&format!("{BASE_URL}x/long")));
    assert!(!served.contains(&format!("{BASE_URL}x/2")));
    check_invariants(&app, 10).await;
}

#[sqlx::test]
async fn a_fold_killed_midway_leaves_nothing_and_another_takes_over(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 100).await;
    app.insert_urls("", "before/", 150).await;

    // A folder takes its turn, then rows are committed (without waiting
    // for it), then it folds them and its process dies before it commits
    // (its session ends).
    let folded = fold_and_die(&app, None, async {
        exec(
            &app.pool,
            &format!(
                "INSERT INTO sitemap_urls (loc) SELECT '{BASE_URL}after/' || g FROM generate_series(1, 500) g"
            ),
        )
        .await;
    })
    .await;
    assert_eq!(folded, 500);

    // The service's own loop takes over within seconds, and places every
    // row once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        app.state.pages.summaries.invalidate();
        if app.served_locs().await.len() == 650 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no fold took over within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.served_locs().await, app.table_locs().await);
    let feed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sitemap_changes WHERE change = 'added' AND loc LIKE '%/after/%'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("feed");
    assert_eq!(feed, 500, "folded once: announced once");
    check_invariants(&app, 100).await;
}

/// A fold leaves unread the rows of a transaction that is still running:
/// they are invisible to it, and a bulk load left open would otherwise be
/// read again by every fold, a core's worth of work for nothing.
#[sqlx::test]
async fn folds_leave_a_running_transactions_rows_unread(pool: PgPool) {
    let (_, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    // A table written by many transactions, with statistics, as a live one
    // is: folds look changes up by change_xid through its index.
    for batch in 0..100 {
        sqlx::query("INSERT INTO sitemap_urls (loc) SELECT $1 || g FROM generate_series(1, 200) g")
            .bind(format!("{BASE_URL}placed/{batch}/"))
            .execute(&mut *folder)
            .await
            .expect("insert");
    }
    assert_eq!(fold_on(&mut folder).await, 20_000);
    exec_on(&mut folder, "ANALYZE sitemap_urls").await;

    let mut loader = pool.begin().await.expect("transaction");
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) SELECT $1 || 'bulk/' || g FROM generate_series(1, 10000) g",
    )
    .bind(BASE_URL)
    .execute(&mut *loader)
    .await
    .expect("load");
    // The first folds meet the load as a transaction newer than any that
    // ended (a snapshot's xmax is one past the last ended one): they read
    // its rows, as they must until they know it as running.
    for _ in 0..2 {
        assert_eq!(fold_on(&mut folder).await, 0);
    }
    let before = tuples_returned(&mut folder, "sitemap_urls_change_idx").await;
    for _ in 0..5 {
        assert_eq!(fold_on(&mut folder).await, 0);
    }
    let reads = tuples_returned(&mut folder, "sitemap_urls_change_idx").await - before;
    assert!(
        reads < 10_000,
        "five folds read {reads} index entries of the running load's rows"
    );

    loader.commit().await.expect("commit");
    assert_eq!(fold_on(&mut folder).await, 10_000, "placed once it commits");
}

/// A bulk load is folded in batches of `fold_batch_rows` changed rows, each
/// committed: its rows show as they are placed, each is read once. What
/// the pass would read after the load, and what commits while it runs, is
/// folded on its own, as a lane, after the batch under way (a row changed
/// again is folded once, as it is then), and from then on the pass reads
/// only the load.
#[sqlx::test]
async fn a_bulk_load_is_folded_in_bounded_batches(pool: PgPool) {
    const BATCH: i64 = 100;
    let (state, mut folder) = prepared_without_a_service(&pool, |s| {
        s.max_urls = 50;
        s.fold_batch_rows = BATCH as u64;
    })
    .await;
    insert_rows(&pool, "bulk/", 1000).await;
    insert_rows(&pool, "late/", 5).await;

    let before = tuples_returned(&mut folder, "sitemap_urls_change_idx").await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (BATCH, true, false)
    );
    assert_eq!(
        placed_rows(&pool).await,
        BATCH,
        "the first batch shows alone"
    );

    // While the pass runs: a row it placed and a row it has yet to read
    // change again, and a new row comes.
    exec(
        &pool,
        &format!(
            "UPDATE sitemap_urls SET lastmod = now() WHERE loc IN ('{BASE_URL}bulk/1', '{BASE_URL}bulk/1000')"
        ),
    )
    .await;
    insert_rows(&pool, "new/", 1).await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (8, false, false),
        "a lane: late/1-5, bulk/1 in place, bulk/1000 and new/1"
    );
    assert_eq!(placed_rows(&pool).await, BATCH + 7);
    let mut pass = BATCH;
    loop {
        let (folded, began, caught_up) = fold_batch_on(&mut folder, Some(BATCH)).await;
        assert!(folded <= BATCH && !began, "one pass, in batches of {BATCH}");
        pass += folded;
        assert_eq!(
            placed_rows(&pool).await,
            pass + 7,
            "each batch shows as it commits"
        );
        if caught_up {
            break;
        }
    }
    assert_eq!(pass, 999, "the pass folds the rest of the load, once");
    let reads = tuples_returned(&mut folder, "sitemap_urls_change_idx").await - before;
    assert!(
        reads < 1100,
        "the pass read {reads} index entries for 1,006 rows: batches re-read rows"
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (0, true, true),
        "the next pass begins where the lane ended"
    );
    let added: (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT loc) FROM sitemap_changes WHERE change = 'added'",
    )
    .fetch_one(&pool)
    .await
    .expect("feed");
    assert_eq!(added, (1006, 1006), "every row announced once");
    let updated: Vec<String> =
        sqlx::query_scalar("SELECT loc FROM sitemap_changes WHERE change <> 'added'")
            .fetch_all(&pool)
            .await
            .expect("feed");
    assert_eq!(updated, [format!("{BASE_URL}bulk/1")]);

    // A fold that waits goes on until everything committed before it is
    // placed, however many batches that takes.
    insert_rows(&pool, "more/", 250).await;
    assert_eq!(state.store.fold(Turn::Wait).await.expect("fold"), Some(250));
    let pages: (i64, i32) =
        sqlx::query_as("SELECT sum(url_count)::bigint, max(url_count) FROM sitemap_pages")
            .fetch_one(&pool)
            .await
            .expect("pages");
    assert_eq!(pages, (1256, 50), "every row placed, no page over max_urls");
}

/// What a fold holds in the service of the rows it places is bounded by
/// `fold_memory_bytes`, whatever the batch: a fold that would hold more
/// rolls back to its start and folds fewer rows, telling how many would
/// fit; the rows are placed and announced once each, on the pages one fold
/// of them all would have put them. A fold of no more rows than a lane
/// reads is never refused, so folds go on whatever the bound.
#[sqlx::test]
async fn a_fold_holds_no_more_memory_than_its_bound(pool: PgPool) {
    const MAX_URLS: i64 = 50;
    const MEMORY: u64 = 256 << 10;
    let (state, mut folder) = prepared_without_a_service(&pool, |s| {
        s.max_urls = MAX_URLS as u32;
        s.fold_memory_bytes = MEMORY;
    })
    .await;
    insert_rows(&pool, "bulk/", 20_000).await;

    let mut folds = Vec::new();
    let mut max_rows = 20_000;
    loop {
        begin_a_fold_on(&mut folder).await;
        let batch =
            sitemapd::store::fold_in(&mut folder, Some(max_rows), MEMORY, &Default::default())
                .await
                .expect("fold");
        exec_on(&mut folder, "COMMIT").await;
        folds.push(batch.folded);
        if batch.caught_up {
            break;
        }
        let fit = batch
            .rows_that_fit
            .expect("a fold that placed rows measured them");
        assert!(fit < 20_000, "{fit} rows said to fit {MEMORY} bytes");
        max_rows = fit as i64;
    }
    assert!(
        folds[0] > 0 && folds[0] < 20_000,
        "the first fold placed fewer rows than asked: {folds:?}"
    );
    assert_eq!(folds.iter().sum::<u64>(), 20_000, "{folds:?}");
    assert!(
        folds.len() < 40,
        "folds of what fits, not of a few rows: {folds:?}"
    );

    // However low the bound, a fold of a lane's rows at most is placed.
    insert_rows(&pool, "one/", 2).await;
    begin_a_fold_on(&mut folder).await;
    let batch = sitemapd::store::fold_in(&mut folder, Some(2), 1, &Default::default())
        .await
        .expect("fold");
    exec_on(&mut folder, "COMMIT").await;
    assert_eq!(batch.folded, 2, "under a bound of a byte");
    assert_eq!(batch.rows_that_fit, Some(1));

    // A fold of the store, as the `fold` command and readers run it, sizes
    // its batches to the bound too.
    insert_rows(&pool, "more/", 3_000).await;
    assert_eq!(
        state.store.fold(Turn::Wait).await.expect("fold"),
        Some(3_000)
    );

    placements_agree(&pool, MAX_URLS).await;
    let out_of_order: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sitemap_placed p
         JOIN (SELECT id, row_number() OVER (ORDER BY id) AS k FROM sitemap_urls) u USING (id)
         WHERE p.page IS DISTINCT FROM ((u.k - 1) / $1 + 1)::integer",
    )
    .bind(MAX_URLS)
    .fetch_one(&pool)
    .await
    .expect("placements");
    assert_eq!(
        out_of_order, 0,
        "pages filled in id order, {MAX_URLS} rows each"
    );
    let added: (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT loc) FROM sitemap_changes WHERE change = 'added'",
    )
    .fetch_one(&pool)
    .await
    .expect("feed");
    assert_eq!(added, (23_002, 23_002), "every row announced once");
}

/// A batch that ends past one transaction's rows, in the next one's, reads
/// on from its last row in (change_xid, id) order, which is not id order
/// when two writers' rows interleave: the highest id read is not the last.
#[sqlx::test]
async fn a_batch_ending_in_a_later_transaction_reads_on_from_its_last_row(pool: PgPool) {
    const BATCH: i64 = 40;
    let (_, mut folder) = prepared_without_a_service(&pool, |s| {
        s.fold_batch_rows = BATCH as u64;
    })
    .await;
    let mut first = pool.acquire().await.expect("a connection");
    let mut second = pool.acquire().await.expect("a connection");
    let insert = |prefix: &str, from: i64, to: i64| {
        sqlx::query(
            "INSERT INTO sitemap_urls (loc) SELECT $1 || g FROM generate_series($2::bigint, $3::bigint) g",
        )
        .bind(format!("{BASE_URL}{prefix}"))
        .bind(from)
        .bind(to)
    };
    // In (change_xid, id) order: first/1-10, first/11-20 (ids 41-50), then
    // second/1-30 (ids 11-40).
    exec_on(&mut first, "BEGIN").await;
    insert("first/", 1, 10)
        .execute(&mut *first)
        .await
        .expect("insert");
    exec_on(&mut second, "BEGIN").await;
    insert("second/", 1, 30)
        .execute(&mut *second)
        .await
        .expect("insert");
    insert("first/", 11, 20)
        .execute(&mut *first)
        .await
        .expect("insert");
    exec_on(&mut first, "COMMIT").await;
    exec_on(&mut second, "COMMIT").await;

    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (BATCH, true, false),
        "first/1-20 and second/1-20: the last row read is second/20, id 30"
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (10, false, true),
        "second/21-30, after the last row read, not after the highest id"
    );
    let (placed, distinct): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT id) FROM sitemap_placed WHERE page IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .expect("placements");
    assert_eq!((placed, distinct), (50, 50));
    placements_agree(&pool, 50_000).await;
}

/// A bulk delete or rename leaves a removal per row; folds take them
/// `fold_batch_rows` at a time, and read no changed row while some are left,
/// so each renamed row's old URL leaves the feed before its new one comes.
#[sqlx::test]
async fn a_bulk_delete_and_rename_are_folded_in_bounded_batches(pool: PgPool) {
    const BATCH: i64 = 100;
    let (state, mut folder) = prepared_without_a_service(&pool, |s| {
        s.max_urls = 50;
        s.fold_batch_rows = BATCH as u64;
    })
    .await;
    insert_rows(&pool, "bulk/", 1000).await;
    assert_eq!(fold_on(&mut folder).await, 1000);

    let mut tx = pool.begin().await.expect("begin");
    for statement in [
        "DELETE FROM sitemap_urls WHERE split_part(loc, '/', 5)::int <= 350",
        "UPDATE sitemap_urls SET loc = replace(loc, '/bulk/', '/moved/')
         WHERE split_part(loc, '/', 5)::int BETWEEN 351 AND 450",
    ] {
        sqlx::query(statement)
            .execute(&mut *tx)
            .await
            .expect(statement);
    }
    tx.commit().await.expect("commit");
    insert_rows(&pool, "late/", 5).await;

    // 450 removals: four folds of removals only, each taking off its pages
    // what it took, then one of the last 50 beside the first 50 rows read.
    for taken in 1..=4 {
        assert_eq!(
            fold_batch_on(&mut folder, Some(BATCH)).await,
            (BATCH, false, false),
            "fold {taken} takes removals only"
        );
        assert_eq!(placed_rows(&pool).await, 1000 - taken * BATCH);
        assert!(state.store.placing_a_backlog().await.expect("state"));
        let new_locs: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sitemap_changes WHERE change = 'added' AND loc NOT LIKE '%/bulk/%'",
        )
        .fetch_one(&pool)
        .await
        .expect("feed");
        assert_eq!(new_locs, 0, "no row read while removals are left");
    }
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (100, true, false),
        "50 removals and 50 rows read"
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (5, false, false),
        "a lane: the rows committed after the rename"
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (50, false, true)
    );
    assert!(!state.store.placing_a_backlog().await.expect("state"));
    assert_eq!(placed_rows(&pool).await, 1000 - 350 + 5);

    let removed: (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT loc),
                count(*) FILTER (WHERE split_part(loc, '/', 5)::int > 450 OR loc NOT LIKE '%/bulk/%')
         FROM sitemap_changes WHERE change = 'removed'",
    )
    .fetch_one(&pool)
    .await
    .expect("feed");
    assert_eq!(removed, (450, 450, 0), "each deleted or renamed URL, once");
    let renamed_early: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sitemap_changes a
         LEFT JOIN sitemap_changes r
             ON r.change = 'removed' AND r.loc = replace(a.loc, '/moved/', '/bulk/') AND r.seq < a.seq
         WHERE a.change = 'added' AND a.loc LIKE '%/moved/%' AND r.seq IS NULL",
    )
    .fetch_one(&pool)
    .await
    .expect("feed");
    assert_eq!(
        renamed_early, 0,
        "a renamed URL's old loc leaves before its new one comes"
    );
    placements_agree(&pool, 50).await;
}

/// A truncation among more removals than a fold takes empties every page
/// in whichever batch takes it; rows written after it are placed.
#[sqlx::test]
async fn a_truncation_among_batches_of_removals_empties_every_page(pool: PgPool) {
    const BATCH: i64 = 100;
    let (_, mut folder) = prepared_without_a_service(&pool, |s| {
        s.fold_batch_rows = BATCH as u64;
    })
    .await;
    insert_rows(&pool, "bulk/", 500).await;
    assert_eq!(fold_on(&mut folder).await, 500);
    exec(
        &pool,
        &format!("DELETE FROM sitemap_urls WHERE loc LIKE '{BASE_URL}bulk/1%'"),
    )
    .await;
    exec(&pool, "TRUNCATE sitemap_urls").await;
    insert_rows(&pool, "after/", 30).await;
    let mut folds = 0;
    loop {
        let (_, _, caught_up) = fold_batch_on(&mut folder, Some(BATCH)).await;
        folds += 1;
        if caught_up {
            break;
        }
        assert!(folds < 10, "the removals run out");
    }
    assert_eq!(folds, 2, "111 removals and the truncation take two folds");
    assert_eq!(placed_rows(&pool).await, 30, "only what came after");
    placements_agree(&pool, 50_000).await;
}

/// A lane takes at most 10,000 rows: more than that, committed while a
/// pass runs, wait for the pass, which goes on reading its own; each lane
/// after a lane takes only what committed since.
#[sqlx::test]
async fn more_rows_than_a_lane_takes_wait_for_the_pass(pool: PgPool) {
    const BATCH: i64 = 100;
    let (_, mut folder) = prepared_without_a_service(&pool, |s| {
        s.fold_batch_rows = BATCH as u64;
    })
    .await;
    insert_rows(&pool, "bulk/", 250).await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (BATCH, true, false)
    );
    insert_rows(&pool, "second-load/", 10_001).await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (BATCH, false, false),
        "no lane: the pass reads on"
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (50, false, true),
        "the pass is done with the load it began with"
    );
    assert_eq!(placed_rows(&pool).await, 250);
    assert_eq!(
        fold_on(&mut folder).await,
        10_001,
        "the next pass reads the rest"
    );

    insert_rows(&pool, "bulk-again/", 250).await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (BATCH, true, false)
    );
    insert_rows(&pool, "one/", 1).await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (1, false, false)
    );
    insert_rows(&pool, "two/", 2).await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (2, false, false),
        "a lane after a lane takes only what committed since"
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (BATCH, false, false)
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (50, false, true)
    );
    assert_eq!(
        fold_batch_on(&mut folder, Some(BATCH)).await,
        (0, true, true)
    );
    assert_eq!(placed_rows(&pool).await, 250 + 10_001 + 250 + 3);
}

/// A large fold keeps its feed entries a row per site, and a site with
/// more than 10,000 of them a row per 10,000 ids, however the sites' rows
/// interleave: one per entry took minutes to write out for 100,000 sites.
/// So are updates and removals.
#[sqlx::test]
async fn a_large_folds_kept_entries_are_grouped_by_site(pool: PgPool) {
    let (state, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    exec(
        &pool,
        "INSERT INTO sitemap_sites (site, origin, path_prefix)
         SELECT 's' || s, 'https://s' || s || '.example.com', '/' FROM generate_series(1, 3000) s;
         INSERT INTO sitemap_urls (site, loc)
         SELECT 's' || s, 'https://s' || s || '.example.com/' || u
         FROM generate_series(1, 5) u, generate_series(1, 3000) s ORDER BY u, s",
    )
    .await;
    insert_rows(&pool, "big/", 25_000).await;
    assert_eq!(fold_on(&mut folder).await, 40_000);
    let kept: Vec<(String, i64, i64, i32)> = sqlx::query_as(
        "SELECT CASE WHEN site = 'default' THEN site ELSE 'small' END, count(*),
                sum(cardinality(locs)), max(cardinality(locs))
         FROM sitemap_change_stash GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .expect("kept entries");
    assert_eq!(
        kept,
        [
            // ids 15,001 to 40,000: four spans of 10,000 ids
            ("default".into(), 4, 25_000, 10_000),
            ("small".into(), 3000, 15_000, 5)
        ]
    );

    let kept_per_site = |change: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (i64, i64)>(
                "SELECT count(*), coalesce(sum(cardinality(locs)), 0)
                 FROM sitemap_change_stash WHERE change = $1 AND site <> 'default'",
            )
            .bind(change)
            .fetch_one(&pool)
            .await
            .expect("kept entries")
        }
    };
    exec(
        &pool,
        "UPDATE sitemap_urls SET lastmod = now() WHERE site <> 'default'",
    )
    .await;
    assert_eq!(fold_on(&mut folder).await, 15_000);
    assert_eq!(kept_per_site("updated").await, (3000, 15_000));
    exec(&pool, "DELETE FROM sitemap_urls WHERE site <> 'default'").await;
    fold_on(&mut folder).await;
    assert_eq!(kept_per_site("removed").await, (3000, 15_000));
    write_out_feed(&state).await;
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_changes")
        .fetch_one(&pool)
        .await
        .expect("feed");
    assert_eq!(written, 40_000 + 15_000 + 15_000, "every entry written out");
}

/// A connection that made its working table of rows to fold before the
/// table kept each row's lastmod (migration `fold_reads_its_rows_once`)
/// folds on it as a new one does: the column is added to it, and a lastmod
/// later than the fold's time is still noted and served as that time.
#[sqlx::test]
async fn a_working_table_made_before_it_kept_lastmods_is_brought_up_to_date(pool: PgPool) {
    let (_, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    insert_rows(&pool, "first/", 2).await;
    assert_eq!(fold_on(&mut folder).await, 2);
    exec_on(
        &mut folder,
        "ALTER TABLE pg_temp.sitemap_fold_rows DROP COLUMN lastmod",
    )
    .await;
    exec(
        &pool,
        &format!(
            "INSERT INTO sitemap_urls (loc, lastmod)
             VALUES ('{BASE_URL}later', now() + interval '1 day')"
        ),
    )
    .await;
    assert_eq!(fold_on(&mut folder).await, 1);
    let (clamps, served_now): (i64, bool) = sqlx::query_as(
        "SELECT count(*), bool_and(served_lastmod < written_lastmod) FROM sitemap_lastmod_clamps",
    )
    .fetch_one(&pool)
    .await
    .expect("clamps");
    assert_eq!((clamps, served_now), (1, true));
}

/// New rows have no placement, and a fold knows it without looking: rows
/// past the newest placed id are placed without a lookup of each, where
/// finding that out cost a scan of every placement (7.5 s of a 21 s fold
/// of 1M new rows onto 5M).
#[sqlx::test]
async fn folds_of_new_rows_leave_the_placements_unread(pool: PgPool) {
    let (_, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    insert_rows(&pool, "placed/", 20_000).await;
    assert_eq!(fold_on(&mut folder).await, 20_000);
    exec_on(
        &mut folder,
        "ANALYZE sitemap_placements, sitemap_placement_runs",
    )
    .await;

    insert_rows(&pool, "new/", 20_000).await;
    let before = placement_reads(&mut folder).await;
    assert_eq!(fold_on(&mut folder).await, 20_000);
    let reads = placement_reads(&mut folder).await - before;
    assert!(
        reads < 100,
        "a fold of 20,000 new rows read or probed placements {reads} times"
    );

    // A changed row is still looked up, and changed in place.
    exec(
        &pool,
        &format!("UPDATE sitemap_urls SET lastmod = now() WHERE loc = '{BASE_URL}placed/7'"),
    )
    .await;
    assert_eq!(fold_on(&mut folder).await, 1);
    let on_page: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_placed")
        .fetch_one(&pool)
        .await
        .expect("placements");
    assert_eq!(on_page, 40_000, "placed once each");
}

/// A fold that finds every row it read kept in its run says nothing is
/// left to place, and the service reads nothing back; one row not kept (a
/// new one beside them) and it reads them as before, and places that row.
#[sqlx::test]
async fn a_fold_of_rows_kept_in_their_runs_has_nothing_to_place(pool: PgPool) {
    let (_, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    insert_rows(&pool, "placed/", 1_000).await;
    assert_eq!(fold_on(&mut folder).await, 1_000);

    assert!(nothing_to_place(&mut folder).await, "nothing read");

    exec(&pool, "UPDATE sitemap_urls SET lastmod = '2026-11-01'").await;
    assert!(nothing_to_place(&mut folder).await, "every row kept");
    assert_eq!(fold_on(&mut folder).await, 1_000);
    assert_eq!(
        placement_shape(&pool).await,
        (16, 1_000, 0),
        "still in their runs"
    );

    exec(
        &pool,
        &format!(
            "BEGIN; UPDATE sitemap_urls SET lastmod = '2026-11-02';
             INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}new/1'); COMMIT"
        ),
    )
    .await;
    assert!(!nothing_to_place(&mut folder).await, "a new row among them");
    assert_eq!(fold_on(&mut folder).await, 1_001);
    assert_eq!(placed_rows(&pool).await, 1_001);
    let updated: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sitemap_changes WHERE change = 'updated'")
            .fetch_one(&pool)
            .await
            .expect("feed");
    assert_eq!(updated, 2_000, "each update in the feed");
}

/// Writes out every feed entry the folds kept, as the service's writer does.
async fn write_out_feed(state: &sitemapd::http::HttpState) {
    state
        .store
        .write_out_feed(Turn::Wait)
        .await
        .expect("written out");
}

/// What `sitemap_fold_begin` says of the rows it would read on `conn` now:
/// whether none is left to place. Rolled back.
async fn nothing_to_place(conn: &mut sqlx::PgConnection) -> bool {
    begin_a_fold_on(&mut *conn).await;
    let nothing: bool = sqlx::query_scalar("SELECT nothing_to_place FROM sitemap_fold_begin(NULL)")
        .fetch_one(&mut *conn)
        .await
        .expect("fold begun");
    exec_on(&mut *conn, "ROLLBACK").await;
    nothing
}

/// A bulk load is kept in runs of up to 64 rows, one row of
/// `sitemap_placement_runs` each. A row changed with its entry as it was
/// (lastmod) stays in its run; one whose entry grew leaves it and stays on
/// its page, placed alone; a deleted one leaves it and its page; a renamed
/// one is placed again at the end. Pages keep serving exactly their rows.
#[sqlx::test]
async fn new_rows_are_placed_in_runs_and_changed_ones_leave_them(pool: PgPool) {
    const MAX_URLS: i64 = 100;
    let app = TestApp::spawn_with(pool, |s| s.max_urls = MAX_URLS as u32).await;
    app.insert_urls("", "bulk/", 1_000).await;
    // Ten pages of 100: a run of 64 and one of 36 on each.
    assert_eq!(placement_shape(&app.pool).await, (20, 1_000, 0));
    check_invariants(&app, MAX_URLS).await;

    let page_of = |loc: String| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<i32>>(
                "SELECT p.page FROM sitemap_urls u CROSS JOIN LATERAL sitemap_placement_of(u.id) p
                 WHERE u.loc = $1",
            )
            .bind(loc)
            .fetch_one(&pool)
            .await
            .expect("placement")
        }
    };
    let loc = |n: u32| format!("{BASE_URL}bulk/{n}");
    assert_eq!(page_of(loc(150)).await, Some(2));
    let feed_end: i64 = sqlx::query_scalar("SELECT max(seq) FROM sitemap_changes")
        .fetch_one(&app.pool)
        .await
        .expect("feed");
    for sql in [
        format!(
            "UPDATE sitemap_urls SET lastmod = '2026-11-01' WHERE loc = '{}'",
            loc(150)
        ),
        format!("DELETE FROM sitemap_urls WHERE loc = '{}'", loc(151)),
        format!(
            "UPDATE sitemap_urls SET loc = loc || '-renamed' WHERE loc = '{}'",
            loc(152)
        ),
        format!(
            "UPDATE sitemap_urls SET images = '[{{\"loc\": \"https://cdn.example.net/153.jpg\"}}]'
             WHERE loc = '{}'",
            loc(153)
        ),
    ] {
        exec(&app.pool, &sql).await;
    }
    app.fold().await;
    assert_eq!(page_of(loc(150)).await, Some(2), "changed in place");
    assert_eq!(page_of(loc(153)).await, Some(2), "grown in place");
    assert_eq!(
        page_of(format!("{}-renamed", loc(152))).await,
        Some(11),
        "a renamed row is placed again at the end"
    );
    // 150 still in its run, 153 placed alone, 151 gone, and 152 renamed a
    // run of its own.
    assert_eq!(placement_shape(&app.pool).await, (21, 998, 1));
    let feed: Vec<(String, String)> = sqlx::query_as(
        "SELECT change, loc FROM sitemap_changes WHERE seq > $1 ORDER BY change, loc",
    )
    .bind(feed_end)
    .fetch_all(&app.pool)
    .await
    .expect("feed");
    let expected = [
        ("added", format!("{}-renamed", loc(152))),
        ("removed", loc(151)),
        ("removed", loc(152)),
        ("updated", loc(150)),
        ("updated", loc(153)),
    ]
    .map(|(change, loc)| (change.to_owned(), loc));
    assert_eq!(feed, expected);
    check_invariants(&app, MAX_URLS).await;
}

/// A change of more than 10,000 placed rows in one fold finds their runs by
/// reading the runs over their ids: each row keeps its run, leaves it, or is
/// placed again, as a few rows do, and its entry is in the feed. A rename of
/// every row then leaves none placed when its pass begins, and each is
/// placed once, over several folds.
#[sqlx::test]
async fn a_bulk_change_of_many_placed_rows_sorts_them_as_few(pool: PgPool) {
    const MAX_URLS: i64 = 1_000;
    let (state, mut folder) =
        prepared_without_a_service(&pool, |s| s.max_urls = MAX_URLS as u32).await;
    insert_rows(&pool, "bulk/", 12_000).await;
    assert_eq!(fold_on(&mut folder).await, 12_000);
    // Twelve pages of 1,000: fifteen runs of 64 and one of 40 on each.
    assert_eq!(placement_shape(&pool).await, (192, 12_000, 0));
    let loc = |n: u32| format!("{BASE_URL}bulk/{n}");
    write_out_feed(&state).await;
    let feed_end: i64 = sqlx::query_scalar("SELECT max(seq) FROM sitemap_changes")
        .fetch_one(&pool)
        .await
        .expect("feed");

    exec(
        &pool,
        &format!(
            "BEGIN;
             UPDATE sitemap_urls SET lastmod = '2026-11-01';
             UPDATE sitemap_urls SET loc = loc || '-renamed' WHERE loc = '{}';
             UPDATE sitemap_urls SET images = '[{{\"loc\": \"https://cdn.example.net/153.jpg\"}}]'
             WHERE loc = '{}';
             COMMIT",
            loc(152),
            loc(153)
        ),
    )
    .await;
    assert_eq!(
        fold_batch_on(&mut folder, Some(20_000)).await,
        (12_001, true, true)
    );
    // 11,998 still in their runs, 153 placed alone, and 152 renamed a run of
    // its own at the end.
    assert_eq!(placement_shape(&pool).await, (193, 11_999, 1));
    let kept: Vec<i32> = sqlx::query_scalar(
        "SELECT cardinality(locs) FROM sitemap_change_stash WHERE change = 'updated' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .expect("kept entries");
    // the kept rows' by blocks of 10,000 ids, announced as their fates are
    // found, then 153's, once it is sized where it is placed alone
    assert_eq!(kept, [9_997, 2_001, 1]);
    write_out_feed(&state).await;
    let feed: Vec<(String, i64)> = sqlx::query_as(
        "SELECT change, count(*) FROM sitemap_changes WHERE seq > $1 GROUP BY change ORDER BY change",
    )
    .bind(feed_end)
    .fetch_all(&pool)
    .await
    .expect("feed");
    assert_eq!(
        feed,
        [
            ("added".to_owned(), 1),
            ("removed".to_owned(), 1),
            ("updated".to_owned(), 11_999)
        ]
    );
    placements_agree(&pool, MAX_URLS).await;

    exec(&pool, "UPDATE sitemap_urls SET loc = loc || '-moved'").await;
    let mut folded = 0;
    loop {
        let (rows, began_a_pass, caught_up) = fold_batch_on(&mut folder, Some(5_000)).await;
        folded += rows;
        if caught_up {
            break;
        }
        if began_a_pass {
            let placed_through: Option<i64> =
                sqlx::query_scalar("SELECT pass_placed_through FROM sitemap_fold_state")
                    .fetch_one(&pool)
                    .await
                    .expect("fold state");
            assert_eq!(placed_through, Some(0), "no row placed when the pass began");
        }
    }
    assert_eq!(
        folded, 24_000,
        "each row taken off its page, and placed again"
    );
    assert_eq!(placed_rows(&pool).await, 12_000);
    placements_agree(&pool, MAX_URLS).await;
}

/// A bulk delete takes the runs it empties whole, and writes the rest of a
/// run it leaves partly again, in order; a URL renamed away twice in one
/// transaction (two removals of it) leaves its run once.
#[sqlx::test]
async fn removals_take_whole_runs_and_leave_the_rest_of_a_run_in_order(pool: PgPool) {
    const MAX_URLS: i64 = 100;
    let app = TestApp::spawn_with(pool, |s| s.max_urls = MAX_URLS as u32).await;
    app.insert_urls("", "bulk/", 300).await;
    // Runs of 1-64 and 65-100 on page 1, and so on.
    assert_eq!(placement_shape(&app.pool).await, (6, 300, 0));

    let loc = |n: u32| format!("{BASE_URL}bulk/{n}");
    let renamed = loc(250);
    exec(
        &app.pool,
        &format!(
            "DELETE FROM sitemap_urls
             WHERE loc IN (SELECT '{BASE_URL}bulk/' || g FROM generate_series(1, 80) g)"
        ),
    )
    .await;
    // One transaction: no fold comes between the renames.
    exec(
        &app.pool,
        &format!(
            "UPDATE sitemap_urls SET loc = '{renamed}-b' WHERE loc = '{renamed}';
             UPDATE sitemap_urls SET loc = '{renamed}' WHERE loc = '{renamed}-b';
             UPDATE sitemap_urls SET loc = '{renamed}-c' WHERE loc = '{renamed}'"
        ),
    )
    .await;
    app.fold().await;

    let runs: Vec<(i32, i64, i64, Vec<i64>)> = sqlx::query_as(
        "SELECT page, first_id, last_id, ids FROM sitemap_placement_runs ORDER BY first_id",
    )
    .fetch_all(&app.pool)
    .await
    .expect("runs");
    let ids_of = |range: std::ops::RangeInclusive<i64>| range.collect::<Vec<_>>();
    assert_eq!(runs[0], (1, 81, 100, ids_of(81..=100)), "what 1-80 left");
    let run_from = |first: i64| runs.iter().find(|run| run.1 == first).map(|run| &run.3);
    let mut expected = ids_of(201..=264);
    expected.retain(|&id| id != 250);
    assert_eq!(run_from(201), Some(&expected), "250 left its run");
    assert_eq!(run_from(265), Some(&ids_of(265..=300)));
    assert!(runs.iter().all(|(_, first, last, ids)| {
        ids.windows(2).all(|pair| pair[0] < pair[1])
            && ids.first() == Some(first)
            && ids.last() == Some(last)
    }));

    let removed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sitemap_changes WHERE change = 'removed' AND loc = $1",
    )
    .bind(&renamed)
    .fetch_one(&app.pool)
    .await
    .expect("feed");
    assert_eq!(removed, 1, "one removal of the URL it was placed as");
    check_invariants(&app, MAX_URLS).await;
}

/// More removals than a fold finds by id (over 10,000) are joined to the
/// runs over their ids: each run they leave partly keeps the rest in order,
/// a row placed alone leaves too, and a URL renamed away twice leaves once.
#[sqlx::test]
async fn many_removals_leave_their_runs_once_and_in_order(pool: PgPool) {
    const MAX_URLS: i64 = 500;
    let app = TestApp::spawn_with(pool, |s| s.max_urls = MAX_URLS as u32).await;
    app.insert_urls("", "bulk/", 12_000).await;
    let loc = |n: u32| format!("{BASE_URL}bulk/{n}");
    exec(
        &app.pool,
        &format!(
            "UPDATE sitemap_urls SET images = '[{{\"loc\": \"https://cdn.example.net/7.jpg\"}}]'
             WHERE loc = '{}'",
            loc(7)
        ),
    )
    .await;
    app.fold().await;
    assert_eq!(placement_shape(&app.pool).await.2, 1, "7 placed alone");

    // Every row but each tenth (7 among them), and 250 renamed away twice:
    // 10,801 removals in one fold.
    let renamed = loc(250);
    exec(
        &app.pool,
        &format!(
            "DELETE FROM sitemap_urls WHERE split_part(loc, '/', 5)::int % 10 <> 0;
             UPDATE sitemap_urls SET loc = '{renamed}-b' WHERE loc = '{renamed}';
             UPDATE sitemap_urls SET loc = '{renamed}' WHERE loc = '{renamed}-b';
             UPDATE sitemap_urls SET loc = '{renamed}-c' WHERE loc = '{renamed}'"
        ),
    )
    .await;
    app.fold().await;

    let mut in_runs: Vec<i64> = runs_in_order(&app.pool).await.concat();
    in_runs.sort_unstable();
    let kept: Vec<i64> = sqlx::query_scalar("SELECT id FROM sitemap_urls ORDER BY id")
        .fetch_all(&app.pool)
        .await
        .expect("rows");
    assert_eq!(kept.len(), 1_200);
    assert_eq!(in_runs, kept, "each tenth row, and 250 placed again");
    assert_eq!(placement_shape(&app.pool).await.2, 0, "7 left its place");

    let removed: (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT loc), count(*) FILTER (WHERE loc = $1)
         FROM sitemap_changes WHERE change = 'removed'",
    )
    .bind(&renamed)
    .fetch_one(&app.pool)
    .await
    .expect("feed");
    assert_eq!(removed, (10_801, 10_801, 1), "each URL that left, once");
    check_invariants(&app, MAX_URLS).await;
}

/// The service applies a fold's removals to the runs itself, reading the
/// runs over many removals' ids a bounded number at a time; an older
/// build's fold leaves them to `sitemap_fold_begin` during a rolling
/// deploy. Both leave the same pages, runs and feed: section `a` is folded
/// by the service, section `b`, changed alike, by the schema alone.
#[sqlx::test]
async fn removals_applied_by_the_service_leave_what_the_schema_leaves(pool: PgPool) {
    // Runs of 10 rows at most (a page's), so a delete of every other row
    // hits more runs than the service reads at once.
    const MAX_URLS: i64 = 10;
    // no fold of the service's own takes the removals before the test's
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = MAX_URLS as u32;
        s.fold_interval_ms = 3_600_000;
    })
    .await;
    for section in ["a", "b"] {
        app.insert_urls(section, &format!("{section}/"), 24_000)
            .await;
        exec(
            &app.pool,
            &format!(
                "UPDATE sitemap_urls SET images = '[{{\"loc\": \"https://cdn.example.net/7.jpg\"}}]'
                 WHERE loc = '{BASE_URL}{section}/7'"
            ),
        )
        .await;
    }
    app.fold().await;
    assert_eq!(placement_shape(&app.pool).await.2, 2, "each 7 placed alone");
    let mut folder = app.pool.acquire().await.expect("connection");

    // Many removals (every odd row, 7 among them, and 250 renamed away
    // twice: 12,003 in a fold), then few.
    let changes = [
        "DELETE FROM sitemap_urls WHERE section = '{s}' AND split_part(loc, '/', 5)::int % 2 = 1;
         UPDATE sitemap_urls SET loc = loc || '-b' WHERE loc = '{base}{s}/250';
         UPDATE sitemap_urls SET loc = '{base}{s}/250' WHERE loc = '{base}{s}/250-b';
         UPDATE sitemap_urls SET loc = loc || '-c' WHERE loc = '{base}{s}/250'",
        "DELETE FROM sitemap_urls WHERE section = '{s}'
             AND split_part(loc, '/', 5) IN ('2', '4', '6', '8', '12')",
    ];
    for change in changes {
        for section in ["a", "b"] {
            let sql = change.replace("{s}", section).replace("{base}", BASE_URL);
            exec(&app.pool, &sql).await;
            fold_removals_alone(&mut folder, section == "a").await;
            app.fold().await;
        }
        let by_section = |section: &'static str| {
            let pool = app.pool.clone();
            async move {
                let pages: Vec<(i32, i32, i64)> = sqlx::query_as(
                    "SELECT page, url_count, bytes FROM sitemap_pages WHERE section = $1 ORDER BY page",
                )
                .bind(section)
                .fetch_all(&pool)
                .await
                .expect("pages");
                let removed: (i64, i64) = sqlx::query_as(
                    "SELECT count(*), count(DISTINCT loc) FROM sitemap_changes
                     WHERE change = 'removed' AND starts_with(loc, $1)",
                )
                .bind(format!("{BASE_URL}{section}/"))
                .fetch_one(&pool)
                .await
                .expect("feed");
                (pages, removed)
            }
        };
        let (a, b) = (by_section("a").await, by_section("b").await);
        let differing: Vec<_> =
            a.0.iter()
                .zip(&b.0)
                .filter(|(a, b)| a != b)
                .take(5)
                .collect();
        assert_eq!(differing, [], "the same pages both ways");
        assert_eq!(a.0.len(), b.0.len(), "as many pages both ways");
        assert_eq!(a.1, b.1, "the same feed both ways");
    }
    let (pages, removed) = by_section_totals(&app.pool, "a").await;
    assert_eq!(pages, 11_995, "half the rows, less five");
    assert_eq!(removed, 12_006, "each URL that left, once");

    runs_in_order(&app.pool).await;
    // A crawl of its 2,400 pages would take minutes of the suite's time.
    placements_agree(&app.pool, MAX_URLS).await;
}

/// A bounded take of removals reads from where the last one ended, then
/// the pages before it: wherever it starts, every removal is taken once.
/// Here a fold's take moves the cursor and rolls back, so the removals
/// before the cursor are still there when the next takes start past them.
#[sqlx::test]
async fn removals_are_taken_wherever_a_take_starts(pool: PgPool) {
    const MAX_URLS: i64 = 500;
    // no fold of the service's own takes removals meanwhile
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = MAX_URLS as u32;
        s.fold_interval_ms = 3_600_000;
    })
    .await;
    app.insert_urls("bulk", "bulk/", 12_000).await;
    app.fold().await;
    exec(
        &app.pool,
        "DELETE FROM sitemap_urls WHERE split_part(loc, '/', 5)::int % 3 <> 0",
    )
    .await;
    let first_removed: i64 = sqlx::query_scalar("SELECT min(id) FROM sitemap_removals")
        .fetch_one(&app.pool)
        .await
        .expect("removals");
    let cursor = sitemapd::store::RemovalsCursor::default();
    let mut folder = app.pool.acquire().await.expect("connection");

    begin_a_fold_on(&mut folder).await;
    sitemapd::store::fold_in(&mut folder, Some(3_000), FOLD_MEMORY, &cursor)
        .await
        .expect("fold");
    exec_on(&mut folder, "ROLLBACK").await;

    let mut folds = 0;
    loop {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_removals")
            .fetch_one(&app.pool)
            .await
            .expect("removals");
        if left == 0 {
            break;
        }
        assert!(folds < 3, "8,000 removals in three folds of 3,000");
        begin_a_fold_on(&mut folder).await;
        sitemapd::store::fold_in(&mut folder, Some(3_000), FOLD_MEMORY, &cursor)
            .await
            .expect("fold");
        exec_on(&mut folder, "COMMIT").await;
        folds += 1;
        if folds == 1 {
            let first_left: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sitemap_removals WHERE id = $1)")
                    .bind(first_removed)
                    .fetch_one(&app.pool)
                    .await
                    .expect("removals");
            assert!(first_left, "the take began past the first removal");
        }
    }
    app.fold().await;
    let (listed, removed) = by_section_totals(&app.pool, "bulk").await;
    assert_eq!(listed, 4_000, "each third row");
    assert_eq!(removed, 8_000, "each URL that left, once");
    runs_in_order(&app.pool).await;
    check_invariants(&app, MAX_URLS).await;
}

/// A fold on `conn` bounded to the removals' count, so that it takes them
/// all and reads nothing else (the next fold places the rest): by the
/// service, or, as an older build's fold during a rolling deploy, by
/// `sitemap_fold_begin` alone.
async fn fold_removals_alone(conn: &mut sqlx::PgConnection, by_the_service: bool) {
    begin_a_fold_on(&mut *conn).await;
    let removals: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_removals")
        .fetch_one(&mut *conn)
        .await
        .expect("removals");
    if by_the_service {
        let batch =
            sitemapd::store::fold_in(&mut *conn, Some(removals), FOLD_MEMORY, &Default::default())
                .await
                .expect("fold");
        assert!(
            !batch.caught_up,
            "a fold that may leave removals reads no row"
        );
    } else {
        let nothing_to_place: bool =
            sqlx::query_scalar("SELECT nothing_to_place FROM sitemap_fold_begin($1)")
                .bind(removals)
                .fetch_one(&mut *conn)
                .await
                .expect("fold");
        assert!(
            nothing_to_place,
            "a fold that may leave removals reads no row"
        );
        exec_on(&mut *conn, "SELECT sitemap_fold_forget_clamps()").await;
        exec_on(&mut *conn, "SELECT sitemap_fold_end()").await;
    }
    exec_on(&mut *conn, "COMMIT").await;
}

/// Every run's ids, each run's checked to be in order and bounded by its
/// first and last id.
async fn runs_in_order(pool: &PgPool) -> Vec<Vec<i64>> {
    let runs: Vec<(i64, i64, Vec<i64>)> =
        sqlx::query_as("SELECT first_id, last_id, ids FROM sitemap_placement_runs")
            .fetch_all(pool)
            .await
            .expect("runs");
    assert!(runs.iter().all(|(first, last, ids)| {
        ids.windows(2).all(|pair| pair[0] < pair[1])
            && ids.first() == Some(first)
            && ids.last() == Some(last)
    }));
    runs.into_iter().map(|(_, _, ids)| ids).collect()
}

/// Rows on a section's pages, and the feed's 'removed' entries of its locs.
async fn by_section_totals(pool: &PgPool, section: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT coalesce(sum(url_count), 0)::bigint FROM sitemap_pages WHERE section = $1),
                (SELECT count(*) FROM sitemap_changes
                 WHERE change = 'removed' AND starts_with(loc, $2))",
    )
    .bind(section)
    .bind(format!("{BASE_URL}{section}/"))
    .fetch_one(pool)
    .await
    .expect("totals")
}

/// A fold of many rows keeps its feed entries for the service to write out
/// apart from the folds; while any are kept, later folds keep theirs after
/// them, so the feed, written out, is in fold order. One writer at a time.
#[sqlx::test]
async fn a_large_folds_feed_entries_are_written_out_in_fold_order(pool: PgPool) {
    let (state, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    let feed = |pool: PgPool| async move {
        sqlx::query_as::<_, (String, String)>(
            "SELECT change, loc FROM sitemap_changes ORDER BY seq",
        )
        .fetch_all(&pool)
        .await
        .expect("feed")
    };
    insert_rows(&pool, "bulk/", 12_000).await;
    assert_eq!(fold_on(&mut folder).await, 12_000);
    exec(
        &pool,
        &format!(
            "DELETE FROM sitemap_urls WHERE loc = '{BASE_URL}bulk/5';
             INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}small/1')"
        ),
    )
    .await;
    assert_eq!(fold_on(&mut folder).await, 2);
    assert_eq!(feed(pool.clone()).await, [], "kept, not yet written out");

    let write_out = || async {
        state
            .store
            .write_out_feed(Turn::Skip)
            .await
            .expect("write out")
    };
    // Another writer holds the turn: this one leaves it.
    let mut writer = pool.begin().await.expect("begin");
    exec_on(&mut writer, "SELECT 1 FROM sitemap_feed_writer FOR UPDATE").await;
    assert_eq!(write_out().await, None);
    writer.rollback().await.expect("rollback");

    assert_eq!(write_out().await, Some(12_002));
    let written = feed(pool.clone()).await;
    let added: Vec<String> = (1..=12_000)
        .map(|n| format!("{BASE_URL}bulk/{n}"))
        .collect();
    assert_eq!(
        written[..12_000]
            .iter()
            .map(|(_, loc)| loc.clone())
            .collect::<Vec<_>>(),
        added
    );
    assert!(
        written[..12_000]
            .iter()
            .all(|(change, _)| change == "added")
    );
    assert_eq!(
        written[12_000..],
        [
            ("removed".to_owned(), format!("{BASE_URL}bulk/5")),
            ("added".to_owned(), format!("{BASE_URL}small/1")),
        ]
    );
    assert_eq!(write_out().await, Some(0));

    // With nothing kept, a small fold writes its entries itself, after
    // the block of seqs the written-out entries took.
    insert_rows(&pool, "small-2/", 1).await;
    assert_eq!(fold_on(&mut folder).await, 1);
    let written = feed(pool.clone()).await;
    assert_eq!(written.len(), 12_003);
    assert_eq!(written[12_002].1, format!("{BASE_URL}small-2/1"));
    let (entries, span): (i64, i64) =
        sqlx::query_as("SELECT count(*), max(seq) - min(seq) + 1 FROM sitemap_changes")
            .fetch_one(&pool)
            .await
            .expect("seqs");
    assert_eq!(entries, span, "seqs without a gap");
}

/// Runs, the URLs they hold, and rows placed alone.
async fn placement_shape(pool: &PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM sitemap_placement_runs),
                (SELECT coalesce(sum(cardinality(ids)), 0) FROM sitemap_placement_runs)::bigint,
                (SELECT count(*) FROM sitemap_placements)",
    )
    .fetch_one(pool)
    .await
    .expect("placements")
}

/// Rows of `sitemap_placements` and `sitemap_placement_runs` read by scans,
/// and index entries read and index scans begun on them, so far.
async fn placement_reads(conn: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT sum(pg_stat_get_tuples_returned(t) + pg_stat_get_xact_tuples_returned(t)
                    + (SELECT sum(pg_stat_get_tuples_returned(i.indexrelid) + pg_stat_get_xact_tuples_returned(i.indexrelid)
                                  + pg_stat_get_numscans(i.indexrelid) + pg_stat_get_xact_numscans(i.indexrelid))
                       FROM pg_index i WHERE i.indrelid = t))::bigint
         FROM unnest(ARRAY['sitemap_placements'::regclass, 'sitemap_placement_runs'::regclass]) t",
    )
    .fetch_one(conn)
    .await
    .expect("placement statistics")
}

/// Inserts rows `{BASE_URL}{prefix}{i}` for i in 1..=n in one statement.
async fn insert_rows(pool: &PgPool, prefix: &str, n: i64) {
    sqlx::query(
        "INSERT INTO sitemap_urls (loc) SELECT $1 || g FROM generate_series(1, $2::bigint) g",
    )
    .bind(format!("{BASE_URL}{prefix}"))
    .bind(n)
    .execute(pool)
    .await
    .expect("insert");
}

/// Right after a bulk load, before anything has analyzed the table
/// (autovacuum off, or behind), folds with nothing new to place must still
/// look changes up through the index: a scan of every row on every fold
/// took 119 s a fold at 70M rows.
#[sqlx::test]
async fn folds_find_changes_through_the_index_without_statistics(pool: PgPool) {
    let (_, mut folder) = prepared_without_a_service(&pool, |_| {}).await;
    sqlx::query("INSERT INTO sitemap_urls (loc) SELECT $1 || g FROM generate_series(1, 100000) g")
        .bind(format!("{BASE_URL}bulk/"))
        .execute(&mut *folder)
        .await
        .expect("bulk load");
    assert_eq!(fold_on(&mut folder).await, 100_000);
    let never_analyzed: bool = sqlx::query_scalar(
        "SELECT reltuples < 0 FROM pg_class WHERE oid = 'sitemap_urls'::regclass",
    )
    .fetch_one(&mut *folder)
    .await
    .expect("reltuples");
    assert!(never_analyzed, "the table has no statistics yet");

    let before = tuples_returned(&mut folder, "sitemap_urls").await;
    for _ in 0..3 {
        assert_eq!(fold_on(&mut folder).await, 0);
    }
    let read = tuples_returned(&mut folder, "sitemap_urls").await - before;
    assert_eq!(
        read, 0,
        "three folds with nothing to fold scanned {read} rows"
    );
}

/// The schema configured as the service does it, and no service: every
/// fold goes through the connection returned, so its own statistics are
/// all there is to count.
async fn prepared_without_a_service(
    pool: &PgPool,
    configure: impl FnOnce(&mut sitemapd::config::Settings),
) -> (
    sitemapd::http::HttpState,
    sqlx::pool::PoolConnection<sqlx::Postgres>,
) {
    let mut settings = sitemapd::config::Settings::defaults();
    settings.base_url = BASE_URL.into();
    configure(&mut settings);
    let config = sitemapd::config::Config::new(settings).expect("valid settings");
    let app = sitemapd::App::prepare(sitemapd::store::Store::from_pool(pool.clone()), &config)
        .await
        .expect("prepared");
    let state = app.state().clone();
    let mut folder = pool.acquire().await.expect("connection");
    exec_on(&mut folder, "SET stats_fetch_consistency = none").await;
    (state, folder)
}

/// Begins a fold's transaction on `conn` as the service does: REPEATABLE
/// READ, with the fold's state locked before anything else.
async fn begin_a_fold_on(conn: &mut sqlx::PgConnection) {
    exec_on(&mut *conn, "BEGIN ISOLATION LEVEL REPEATABLE READ").await;
    exec_on(
        &mut *conn,
        "LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE",
    )
    .await;
}

/// A fold of everything committed on `conn`, as the service runs one.
async fn fold_on(conn: &mut sqlx::PgConnection) -> i64 {
    let (folded, _, caught_up) = fold_batch_on(conn, None).await;
    assert!(caught_up, "a fold without a bound catches up");
    folded
}

/// A fold of at most `max_rows` changed rows on `conn`: what it folded,
/// whether it began a pass, and whether it caught up.
async fn fold_batch_on(conn: &mut sqlx::PgConnection, max_rows: Option<i64>) -> (i64, bool, bool) {
    begin_a_fold_on(&mut *conn).await;
    let batch = sitemapd::store::fold_in(&mut *conn, max_rows, FOLD_MEMORY, &Default::default())
        .await
        .expect("fold");
    exec_on(&mut *conn, "COMMIT").await;
    (batch.folded as i64, batch.began_a_pass, batch.caught_up)
}

/// A fold of everything committed on `conn` by the schema's own function,
/// as the service ran one before the numbering moved into it (migration
/// `numbering_in_the_service`).
async fn schema_fold_on(conn: &mut sqlx::PgConnection) {
    begin_a_fold_on(&mut *conn).await;
    let caught_up: bool = sqlx::query_scalar("SELECT caught_up FROM sitemap_fold(NULL)")
        .fetch_one(&mut *conn)
        .await
        .expect("fold");
    assert!(caught_up, "a fold without a bound catches up");
    exec_on(&mut *conn, "COMMIT").await;
}

/// Rows on pages, as the summaries count them.
async fn placed_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT coalesce(sum(url_count), 0)::bigint FROM sitemap_pages")
        .fetch_one(pool)
        .await
        .expect("pages")
}

/// What `relation` (a table or an index) returned to scans so far: what
/// sessions reported, and what this one has counted and not reported yet.
async fn tuples_returned(conn: &mut sqlx::PgConnection, relation: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT pg_stat_get_tuples_returned(r) + pg_stat_get_xact_tuples_returned(r)
         FROM CAST($1::text AS regclass) r",
    )
    .bind(relation)
    .fetch_one(conn)
    .await
    .expect("statistics")
}

async fn exec_on(conn: &mut sqlx::PgConnection, sql: &'static str) {
    sqlx::query(sql).execute(conn).await.expect(sql);
}

/// Takes the fold's turn as the service does, runs `before_fold`, folds,
/// checks that no one else can fold meanwhile, then ends the folding
/// session before it commits, as a folder's death would. Returns what the
/// fold had done.
async fn fold_and_die(
    app: &TestApp,
    max_rows: Option<i64>,
    before_fold: impl Future<Output = ()>,
) -> i64 {
    let mut folder = app.pool.acquire().await.expect("connection");
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *folder)
        .await
        .expect("pid");
    exec_on(
        &mut folder,
        "SELECT pg_advisory_lock(hashtext('sitemapd'), hashtext('fold turn'))",
    )
    .await;
    exec_on(&mut folder, "BEGIN ISOLATION LEVEL REPEATABLE READ").await;
    exec_on(
        &mut folder,
        "LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE",
    )
    .await;
    before_fold.await;
    let folded = sitemapd::store::fold_in(&mut folder, max_rows, FOLD_MEMORY, &Default::default())
        .await
        .expect("fold")
        .folded as i64;
    assert_eq!(
        app.state.store.fold(Turn::Skip).await.expect("fold"),
        None,
        "one fold at a time"
    );
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&app.pool)
        .await
        .expect("terminate");
    assert!(killed);
    drop(folder);
    folded
}

#[sqlx::test]
async fn the_change_feed_records_what_changed_in_commit_order(pool: PgPool) {
    // The service's own prunes keep 30 days, so only the test's (7 days)
    // take the entries it ages by 8: the service's first prune, on a
    // loaded machine, could otherwise land between the ageing and the
    // test's prune.
    let app = TestApp::spawn_with(pool, |s| {
        s.change_log_retention = Duration::from_secs(30 * 86_400);
    })
    .await;
    let loc = |path: &str| format!("{BASE_URL}{path}");
    for sql in [
        format!(
            "INSERT INTO sitemap_urls (loc) VALUES ('{}'), ('{}')",
            loc("a"),
            loc("b")
        ),
        format!(
            "UPDATE sitemap_urls SET lastmod = '2026-01-01' WHERE loc = '{}'",
            loc("a")
        ),
        // A no-op is no news.
        format!(
            "UPDATE sitemap_urls SET lastmod = '2026-01-01' WHERE loc = '{}'",
            loc("a")
        ),
        format!(
            "UPDATE sitemap_urls SET loc = '{}' WHERE loc = '{}'",
            loc("b2"),
            loc("b")
        ),
        format!("DELETE FROM sitemap_urls WHERE loc = '{}'", loc("a")),
        // Left out of the sitemaps: not in the feed either.
        "INSERT INTO sitemap_urls (loc) VALUES ('https://elsewhere.example/x')".to_owned(),
    ] {
        exec(&app.pool, &sql).await;
        app.fold().await;
    }
    let feed: Vec<(String, String)> =
        sqlx::query_as("SELECT change, loc FROM sitemap_changes ORDER BY seq")
            .fetch_all(&app.pool)
            .await
            .expect("feed");
    let expected = [
        ("added", "a"),
        ("added", "b"),
        ("updated", "a"),
        ("removed", "b"),
        ("added", "b2"),
        ("removed", "a"),
    ]
    .map(|(change, path)| (change.to_owned(), loc(path)));
    assert_eq!(feed, expected);

    // Bounded: the oldest go first.
    let pruned = app
        .state
        .store
        .prune_changes(sitemapd::store::Retention {
            max_age: Duration::from_secs(3600),
            max_rows: 2,
        })
        .await
        .expect("prune");
    assert_eq!(pruned, 4);
    let left: Vec<String> = sqlx::query_scalar("SELECT loc FROM sitemap_changes ORDER BY seq")
        .fetch_all(&app.pool)
        .await
        .expect("feed");
    assert_eq!(left, [loc("b2"), loc("a")]);
    let by_age = sitemapd::store::Retention {
        max_age: Duration::from_secs(7 * 86_400),
        max_rows: 100,
    };
    exec(
        &app.pool,
        "UPDATE sitemap_changes SET committed_at = committed_at - interval '8 days'
         WHERE seq = (SELECT min(seq) FROM sitemap_changes)",
    )
    .await;
    let pruned = app.state.store.prune_changes(by_age).await.expect("prune");
    assert_eq!(pruned, 1, "the entry older than the retention");
    let left: Vec<String> = sqlx::query_scalar("SELECT loc FROM sitemap_changes ORDER BY seq")
        .fetch_all(&app.pool)
        .await
        .expect("feed");
    assert_eq!(left, [loc("a")]);
    exec(
        &app.pool,
        "UPDATE sitemap_changes SET committed_at = committed_at - interval '8 days'",
    )
    .await;
    let pruned = app.state.store.prune_changes(by_age).await.expect("prune");
    assert_eq!(pruned, 1, "older than the retention");
    let pruned = app.state.store.prune_changes(by_age).await.expect("prune");
    assert_eq!(pruned, 0, "an empty feed");
}

/// An app with 150,000 rows in the section "bulk", and autovacuum off on
/// the removals (as it is everywhere on the machines this suite runs on).
async fn bulk_rows_without_autovacuum(pool: PgPool) -> TestApp {
    let app = TestApp::spawn(pool).await;
    exec(
        &app.pool,
        "ALTER TABLE sitemap_removals SET (autovacuum_enabled = false)",
    )
    .await;
    app.insert_urls("bulk", "bulk/", 150_000).await;
    app
}

async fn removal_pages(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT pg_relation_size('sitemap_removals') / 8192")
        .fetch_one(pool)
        .await
        .expect("removals' size")
}

/// Looks every 50 ms until `holds` does, for `within` at most; then fails
/// with `failure`.
async fn until<F: Future<Output = bool>>(
    within: Duration,
    failure: &str,
    mut holds: impl FnMut() -> F,
) {
    let deadline = tokio::time::Instant::now() + within;
    while !holds().await {
        assert!(tokio::time::Instant::now() < deadline, "{failure}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the service's folds have truncated the removals' heap to
/// no page, 60 s at most after `since`.
async fn until_the_removals_are_truncated(pool: &PgPool, since: &str) {
    until(
        Duration::from_secs(60),
        &format!("the removals' heap was not truncated within 60 s of {since}"),
        || async { removal_pages(pool).await == 0 },
    )
    .await;
}

/// Taken removals stay as dead tuples until a vacuum, and every later take
/// reads their pages. Once the service's folds have taken the last of a
/// heap of them larger than 8 MiB, they vacuum it: the heap is truncated
/// and the next takes read nothing, where autovacuum is off or has yet to
/// come round.
#[sqlx::test]
async fn folds_that_empty_a_large_heap_of_removals_vacuum_it(pool: PgPool) {
    let app = bulk_rows_without_autovacuum(pool).await;
    exec(&app.pool, "DELETE FROM sitemap_urls").await;
    assert!(
        removal_pages(&app.pool).await > 1_024,
        "150,000 removals span more than 1,024 pages"
    );
    until_the_removals_are_truncated(&app.pool, "the delete").await;
    // the feed's entries written out too
    app.fold().await;
    let (listed, removed) = by_section_totals(&app.pool, "bulk").await;
    assert_eq!(listed, 0);
    assert_eq!(removed, 150_000, "each URL that left, once");
    app.insert_urls("bulk", "bulk/again-", 10).await;
    exec(&app.pool, "DELETE FROM sitemap_urls").await;
    app.fold().await;
    assert_eq!(
        by_section_totals(&app.pool, "bulk").await,
        (0, 150_010),
        "removals written into the truncated heap are taken"
    );
    check_invariants(&app, 50_000).await;
}

/// A vacuum removes no tuple deleted after the oldest snapshot still held
/// (a reader's, or the service's own feed writer's), and truncates no page
/// with one: a reader who holds a snapshot through the drain leaves the
/// removals' heap whole after the first vacuum. Later folds vacuum it again
/// once the snapshot is gone.
#[sqlx::test]
async fn a_snapshot_held_through_the_drain_only_delays_the_removals_vacuum(pool: PgPool) {
    let app = bulk_rows_without_autovacuum(pool).await;
    let mut reader = app.pool.acquire().await.expect("connection");
    exec_on(&mut reader, "BEGIN ISOLATION LEVEL REPEATABLE READ").await;
    exec_on(&mut reader, "SELECT count(*) FROM sitemap_urls").await;
    exec(&app.pool, "DELETE FROM sitemap_urls").await;
    until(
        Duration::from_secs(60),
        "the drained removals were not vacuumed within 60 s of the delete",
        || async { vacuums(&app.pool, "sitemap_removals").await > 0 },
    )
    .await;
    assert!(
        removal_pages(&app.pool).await > 1_024,
        "the reader's snapshot kept the taken removals"
    );
    exec_on(&mut reader, "COMMIT").await;
    until_the_removals_are_truncated(&app.pool, "the snapshot's end").await;
    app.fold().await;
    assert_eq!(by_section_totals(&app.pool, "bulk").await, (0, 150_000));
    check_invariants(&app, 50_000).await;
}

/// The service prunes the feed beside its folds: a prune waiting on a lock
/// (as one of millions of entries takes seconds) holds back no fold.
#[sqlx::test]
async fn a_prune_that_waits_holds_back_no_fold(pool: PgPool) {
    let mut first = TestApp::spawn(pool.clone()).await;
    first.insert_urls("old", "old/", 10).await;
    first.fold().await;
    first
        .begin_shutdown()
        .await
        .expect("joined")
        .expect("served");
    exec(
        &pool,
        "UPDATE sitemap_changes SET committed_at = committed_at - interval '8 days'",
    )
    .await;
    let mut holder = pool.acquire().await.expect("connection");
    exec_on(&mut holder, "BEGIN").await;
    exec_on(
        &mut holder,
        "SELECT seq FROM sitemap_changes ORDER BY seq LIMIT 1 FOR UPDATE",
    )
    .await;
    // Its first round prunes what is past the 7 days' retention.
    let app = TestApp::spawn(pool.clone()).await;
    crate::helpers::until_a_statement_waits_on_a_lock(&pool, "DELETE FROM sitemap_changes").await;
    exec(
        &pool,
        &format!("INSERT INTO sitemap_urls (section, loc) VALUES ('new', '{BASE_URL}new/1')"),
    )
    .await;
    until(
        Duration::from_secs(10),
        "a row committed while the prune waited was not placed within 10 s",
        || async { by_section_totals(&pool, "new").await.0 > 0 },
    )
    .await;
    exec_on(&mut holder, "COMMIT").await;
    until(
        Duration::from_secs(10),
        "the prune did not finish within 10 s of the lock's release",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM sitemap_changes WHERE committed_at < now() - interval '7 days'",
            )
            .fetch_one(&pool)
            .await
            .expect("feed")
                == 0
        },
    )
    .await;
    check_invariants(&app, 50_000).await;
}

/// Pruned entries' space is written again: the feed stays the size of what
/// it keeps, where autovacuum is off (as on the machines this suite runs
/// on) or behind.
#[sqlx::test]
async fn the_pruned_feed_makes_room_for_new_entries(pool: PgPool) {
    let app = without_the_services_rounds(pool).await;
    app.insert_urls("default", "first/", 3000).await;
    assert_eq!(prune_to_1000(&app).await, 2000);
    until_the_feed_is_vacuumed(&app).await;
    assert!(!reclaim_feed_space(&app).await, "nothing left to reclaim");
    let feed_bytes = || async {
        sqlx::query_scalar::<_, i64>("SELECT pg_relation_size('sitemap_changes')")
            .fetch_one(&app.pool)
            .await
            .expect("feed size")
    };
    let before = feed_bytes().await;
    app.insert_urls("default", "second/", 2000).await;
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM sitemap_changes")
        .fetch_one(&app.pool)
        .await
        .expect("feed");
    assert_eq!(entries, 3000);
    assert_eq!(
        feed_bytes().await,
        before,
        "2,000 new entries take the space of the 2,000 pruned"
    );
}

/// A vacuum removes no entry pruned after the oldest snapshot still held,
/// so while one is, the feed stays due after its vacuum. It is not
/// vacuumed again, for nothing, until that snapshot ends.
#[sqlx::test]
async fn a_held_snapshot_defers_the_feed_vacuum_until_it_ends(pool: PgPool) {
    let app = without_the_services_rounds(pool).await;
    app.insert_urls("default", "first/", 3000).await;
    let mut reader = app.pool.acquire().await.expect("connection");
    exec_on(&mut reader, "BEGIN ISOLATION LEVEL REPEATABLE READ").await;
    exec_on(&mut reader, "SELECT count(*) FROM sitemap_changes").await;
    assert_eq!(prune_to_1000(&app).await, 2000);
    until_the_feed_is_vacuumed(&app).await;
    let before = vacuums(&app.pool, "sitemap_changes").await;
    assert!(
        !reclaim_feed_space(&app).await,
        "the reader's snapshot still holds the pruned entries: no vacuum"
    );
    assert_eq!(vacuums(&app.pool, "sitemap_changes").await, before);
    exec_on(&mut reader, "COMMIT").await;
    assert!(
        reclaim_feed_space(&app).await,
        "the snapshot ended: the pruned entries can go"
    );
    assert_eq!(vacuums(&app.pool, "sitemap_changes").await, before + 1);
    assert!(!reclaim_feed_space(&app).await, "nothing left to reclaim");
}

/// The service with its rounds (a prune at start) out of the way, so a
/// test prunes and vacuums the feed itself.
async fn without_the_services_rounds(pool: PgPool) -> TestApp {
    TestApp::spawn_with(pool, |s| s.fold_interval_ms = 3_600_000).await
}

/// Prunes the feed to its newest 1,000 entries; returns how many went.
async fn prune_to_1000(app: &TestApp) -> u64 {
    let keep_1000 = sitemapd::store::Retention {
        max_age: Duration::from_secs(3600),
        max_rows: 1000,
    };
    app.state
        .store
        .prune_changes(keep_1000)
        .await
        .expect("prune")
}

async fn reclaim_feed_space(app: &TestApp) -> bool {
    app.state
        .store
        .reclaim_feed_space()
        .await
        .expect("reclaim the feed's space")
}

/// Asks for the feed's vacuum until it runs: the statistics hear of a
/// prune's deletions within seconds.
async fn until_the_feed_is_vacuumed(app: &TestApp) {
    until(
        Duration::from_secs(30),
        "the pruned entries never made the feed due a vacuum",
        || reclaim_feed_space(app),
    )
    .await;
}

/// How many times `table` was vacuumed by hand (not by autovacuum).
async fn vacuums(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = $1")
        .bind(table)
        .fetch_one(pool)
        .await
        .expect("a table's vacuums")
}

/// Every page and summary against the rows, once everything committed is
/// folded: counts and bytes exact and within the limits, every servable
/// row on exactly one page, nothing placed that is not a row, and every
/// page serving exactly its rows.
async fn check_invariants(app: &TestApp, max_urls: i64) {
    app.fold().await;
    placements_agree(&app.pool, max_urls).await;
    app.state.pages.summaries.invalidate();
    assert_eq!(app.served_locs().await, app.table_locs().await);
}

/// Every row placed once, as it is now, and every page's summary counts
/// what is placed on it, within the limits.
async fn placements_agree(pool: &PgPool, max_urls: i64) {
    let wrong_summaries: Vec<(String, i32, i32, i64)> = sqlx::query_as(
        "SELECT s.section, s.page, s.url_count, coalesce(p.n, 0)
         FROM sitemap_pages s
         LEFT JOIN (SELECT site, section, page, count(*) AS n, sum(bytes) AS b
                    FROM sitemap_placed WHERE page IS NOT NULL
                    GROUP BY site, section, page) p
             ON (p.site, p.section, p.page) = (s.site, s.section, s.page)
         WHERE s.url_count <> coalesce(p.n, 0) OR s.bytes <> coalesce(p.b, 0)
            OR s.url_count > $1
            OR s.bytes > (SELECT entry_budget FROM sitemap_settings)",
    )
    .bind(max_urls)
    .fetch_all(pool)
    .await
    .expect("summaries");
    assert_eq!(wrong_summaries, [], "summaries exact and within limits");
    let unsummarised: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sitemap_placed p
         WHERE p.page IS NOT NULL AND NOT EXISTS (
             SELECT 1 FROM sitemap_pages s WHERE (s.site, s.section, s.page) = (p.site, p.section, p.page))",
    )
    .fetch_one(pool)
    .await
    .expect("pages");
    assert_eq!(unsummarised, 0);
    let misplaced: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sitemap_urls u
         FULL JOIN sitemap_placed p ON p.id = u.id
         WHERE u.id IS NULL OR p.id IS NULL
            OR (p.site, p.section, p.loc_hash) <> (u.site, u.section, sitemap_loc_hash(u.loc))",
    )
    .fetch_one(pool)
    .await
    .expect("placements");
    assert_eq!(misplaced, 0, "every row placed, as it is");
    let placed_twice: i64 =
        sqlx::query_scalar("SELECT count(*) - count(DISTINCT id) FROM sitemap_placed")
            .fetch_one(pool)
            .await
            .expect("placements");
    assert_eq!(placed_twice, 0, "no row both in a run and placed alone");
}

/// Where each row is, by id, with the identity it was placed with.
async fn placements(pool: &PgPool) -> HashMap<i64, (String, i64, Option<i32>)> {
    sqlx::query_as::<_, (i64, String, i64, Option<i32>)>(
        "SELECT id, section, loc_hash, page FROM sitemap_placed",
    )
    .fetch_all(pool)
    .await
    .expect("placements")
    .into_iter()
    .map(|(id, section, hash, page)| (id, (section, hash, page)))
    .collect()
}

/// A small deterministic generator: the same seed, the same run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[sqlx::test]
async fn invariants_hold_under_concurrent_writers_long_transactions_and_a_killed_folder(
    pool: PgPool,
) {
    const MAX_URLS: i64 = 20;
    // Passes of several folds each, so that folders die in the middle of
    // them as well as at their end.
    const BATCH_ROWS: i64 = 16;
    let app = TestApp::spawn_with(pool, |s| {
        s.max_urls = MAX_URLS as u32;
        s.fold_interval_ms = 50;
        s.fold_batch_rows = BATCH_ROWS as u64;
    })
    .await;
    app.insert_urls("a", "seed/a/", 60).await;
    app.insert_urls("b", "seed/b/", 60).await;

    let writer = |seed: u64| {
        let pool = app.pool.clone();
        async move {
            let mut rng = Rng(seed);
            for round in 0..30 {
                let mut tx = pool.begin().await.expect("begin");
                for op in 0..1 + rng.below(4) {
                    let section = ["a", "b"][rng.below(2) as usize];
                    let id = 1 + rng.below(160 + 30 * round);
                    let sql = match rng.below(6) {
                        0 | 1 => format!(
                            "INSERT INTO sitemap_urls (section, loc) SELECT '{section}', '{BASE_URL}w{seed}/{round}/{op}/' || g
                             FROM generate_series(1, {}) g",
                            1 + rng.below(8)
                        ),
                        2 => format!("UPDATE sitemap_urls SET lastmod = clock_timestamp() WHERE id = {id}"),
                        3 => format!("DELETE FROM sitemap_urls WHERE id = {id}"),
                        4 => format!(
                            "UPDATE sitemap_urls SET loc = loc || '-r{seed}' WHERE id = {id}"
                        ),
                        _ => format!("UPDATE sitemap_urls SET section = '{section}' WHERE id = {id}"),
                    };
                    // Rows another writer holds are waited for, as any two
                    // writers of one row wait; a deadlock between them is
                    // PostgreSQL's to break, and the loser rolls back.
                    if sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut *tx)
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                if rng.below(5) == 0 {
                    // A long transaction.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                if rng.below(8) == 0 {
                    let _ = tx.rollback().await;
                } else {
                    let _ = tx.commit().await;
                }
            }
        }
    };
    let killer = async {
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            fold_and_die(&app, Some(BATCH_ROWS), async {}).await;
        }
    };
    // Rows never move: whenever two looks see a row with the same identity,
    // it is on the same page.
    let watcher = async {
        let mut seen = placements(&app.pool).await;
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = placements(&app.pool).await;
            for (id, (section, hash, page)) in &now {
                if let Some((was_section, was_hash, was_page)) = seen.get(id)
                    && (was_section, was_hash) == (section, hash)
                {
                    assert_eq!(was_page, page, "row {id} moved");
                }
            }
            seen = now;
        }
    };
    tokio::join!(writer(1), writer(2), writer(3), writer(4), killer, watcher);
    check_invariants(&app, MAX_URLS).await;
    // The entries folds kept are written out beside them: all of them first.
    app.state
        .store
        .write_out_feed(sitemapd::store::Turn::Wait)
        .await
        .expect("feed written out");
    let kinds: Vec<(String, i64)> =
        sqlx::query_as("SELECT change, count(*) FROM sitemap_changes GROUP BY 1 ORDER BY 1")
            .fetch_all(&app.pool)
            .await
            .expect("feed");
    // A row changed twice between two folds is one entry, so how many each
    // kind has depends on how often folds ran: on a busy machine, 9 updates.
    assert!(
        kinds.len() == 3 && kinds.iter().all(|(_, n)| *n >= 3),
        "the writers added, changed and removed rows: {kinds:?}"
    );
}

/// Every page summary, in order.
async fn summaries(pool: &PgPool) -> Vec<(String, i32, i32, i64, time::OffsetDateTime)> {
    sqlx::query_as(
        "SELECT section, page, url_count, bytes, lastmod FROM sitemap_pages ORDER BY section, page",
    )
    .fetch_all(pool)
    .await
    .expect("summaries")
}

/// Applies the migrations a database of an older schema lacks, and serves
/// it with 5 URLs a page, as [`migrated_to`] set it up.
async fn upgraded(pool: &PgPool) -> TestApp {
    sitemapd::store::Store::from_pool(pool.clone())
        .migrate()
        .await
        .expect("upgrade");
    TestApp::spawn_with(pool.clone(), |s| s.max_urls = 5).await
}

/// Migrates a database no further than `version`, with 5 URLs a page and the
/// default site configured as that schema's service would; returns the
/// writes the upgrade tests make on it: two sections' rows, deletions, a
/// rename, a change in place and a row out of scope.
async fn migrated_to(pool: &PgPool, version: i64) -> Vec<String> {
    sqlx::migrate!()
        .run_to(version, pool)
        .await
        .expect("previous schema");
    let budget = 52_428_800 - sitemapd::sitemap::DOCUMENT_RESERVE as i64;
    sqlx::query("SELECT sitemap_configure_limits(5, $1)")
        .bind(budget)
        .execute(pool)
        .await
        .expect("limits");
    exec(
        pool,
        "SELECT sitemap_configure_site('default', 'https://www.example.com', '/')",
    )
    .await;
    vec![
        format!(
            "INSERT INTO sitemap_urls (loc) SELECT '{BASE_URL}p/' || g FROM generate_series(1, 12) g"
        ),
        format!(
            "INSERT INTO sitemap_urls (section, loc) SELECT 'news', '{BASE_URL}n/' || g FROM generate_series(1, 7) g"
        ),
        format!("DELETE FROM sitemap_urls WHERE loc IN ('{BASE_URL}p/2', '{BASE_URL}p/7')"),
        format!(
            "UPDATE sitemap_urls SET loc = '{BASE_URL}p/3-renamed' WHERE loc = '{BASE_URL}p/3'"
        ),
        format!("UPDATE sitemap_urls SET lastmod = '2026-05-01' WHERE loc = '{BASE_URL}n/2'"),
        "INSERT INTO sitemap_urls (loc) VALUES ('https://elsewhere.example/x')".to_owned(),
    ]
}

#[sqlx::test(migrations = false)]
async fn a_database_of_the_previous_schema_upgrades_in_place(pool: PgPool) {
    // The schema as it was before placement moved into the service, written
    // through its triggers.
    for sql in migrated_to(&pool, 20261123000001).await {
        exec(&pool, &sql).await;
    }
    let rows_before: Vec<(i64, Option<i32>, Option<String>)> =
        sqlx::query_as("SELECT id, page, skip_reason FROM sitemap_urls ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("rows");
    let summaries_before = summaries(&pool).await;
    let app = upgraded(&pool).await;
    let rows_after: Vec<(i64, Option<i32>, Option<String>)> = sqlx::query_as(
        "SELECT u.id, p.page, p.skip_reason FROM sitemap_urls u
         JOIN sitemap_placed p ON p.id = u.id ORDER BY u.id",
    )
    .fetch_all(&pool)
    .await
    .expect("rows");
    assert_eq!(rows_after, rows_before, "every row where it was");
    assert_eq!(
        summaries(&pool).await,
        summaries_before,
        "every summary, lastmod included, as it was: the same validators"
    );
    // Each page serves its rows in id order, as before.
    let served: Vec<(String, Vec<String>)> = app.crawl().await;
    let expected: Vec<(String, Vec<String>)> = sqlx::query_as::<_, (String, Vec<String>)>(
        "SELECT '/sitemap-' || CASE WHEN u.section = '' THEN '' ELSE u.section || '-' END || p.page || '.xml.gz',
                array_agg(u.loc ORDER BY u.id)
         FROM sitemap_urls u JOIN sitemap_placed p ON p.id = u.id
         WHERE p.page IS NOT NULL
         GROUP BY u.section, p.page ORDER BY u.section, p.page",
    )
    .fetch_all(&pool)
    .await
    .expect("expected pages");
    assert_eq!(served, expected);

    // And it goes on from there: a new row fills the last page.
    exec(
        &pool,
        &format!("INSERT INTO sitemap_urls (loc) VALUES ('{BASE_URL}p/new')"),
    )
    .await;
    app.fold().await;
    let crawl = app.crawl().await;
    let last = crawl
        .iter()
        .rfind(|(path, _)| !path.contains("news"))
        .expect("a default page");
    assert_eq!(last.1.last(), Some(&format!("{BASE_URL}p/new")));
    check_invariants(&app, 5).await;
}

/// A database whose rows the previous fold placed one by one upgrades with
/// every row on its page and every summary as it was, so every page serves
/// what it served; rows placed after it form runs from where it left off.
#[sqlx::test(migrations = false)]
async fn placements_of_the_previous_fold_stay_where_they_are(pool: PgPool) {
    let mut folder = pool.acquire().await.expect("connection");
    for sql in migrated_to(&pool, 20261129000002).await {
        exec(&pool, &sql).await;
        schema_fold_on(&mut folder).await;
    }
    drop(folder);
    let placed = |pool: PgPool, table: &'static str| async move {
        sqlx::query_as::<_, (i64, Option<i32>, Option<String>, i32)>(sqlx::AssertSqlSafe(format!(
            "SELECT id, page, skip_reason, bytes FROM {table} ORDER BY id"
        )))
        .fetch_all(&pool)
        .await
        .expect("placements")
    };
    let placed_before = placed(pool.clone(), "sitemap_placements").await;
    assert_eq!(placed_before.len(), 18, "every row placed or left out");
    let summaries_before = summaries(&pool).await;
    let app = upgraded(&pool).await;
    assert_eq!(placed(pool.clone(), "sitemap_placed").await, placed_before);
    assert_eq!(summaries(&pool).await, summaries_before);
    let page = |crawl: &[(String, Vec<String>)], path: &str| {
        crawl
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, locs)| locs.clone())
            .unwrap_or_else(|| panic!("{path} served"))
    };
    let locs = |names: &[&str]| -> Vec<String> {
        names.iter().map(|n| format!("{BASE_URL}{n}")).collect()
    };
    let served = app.crawl().await;
    assert_eq!(served.len(), 5, "three default pages and two of news");
    assert_eq!(
        page(&served, "/sitemap-1.xml.gz"),
        locs(&["p/1", "p/4", "p/5"])
    );
    assert_eq!(
        page(&served, "/sitemap-3.xml.gz"),
        locs(&["p/3-renamed", "p/11", "p/12"])
    );

    // New rows fill the last page, then a new one, as runs.
    app.insert_urls("", "q/", 4).await;
    assert_eq!(placement_shape(&pool).await, (2, 4, 18));
    let served = app.crawl().await;
    assert_eq!(
        page(&served, "/sitemap-3.xml.gz"),
        locs(&["p/3-renamed", "p/11", "p/12", "q/1", "q/2"])
    );
    assert_eq!(page(&served, "/sitemap-4.xml.gz"), locs(&["q/3", "q/4"]));
    check_invariants(&app, 5).await;
}
