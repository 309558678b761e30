//! Clients that do not play along, over raw sockets: headers that never
//! finish, connections that sit idle, readers that stop reading, floods past
//! the connection cap, and requests whose `Host` cannot be trusted. None of
//! them may hold the service's connections or memory for long.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::TestApp;

/// Reads until the server closes the connection (end of stream or reset);
/// returns what arrived and how long that took, or `None` past `limit`.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> Option<(Vec<u8>, Duration)> {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let read_all = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read_all).await.ok()?;
    Some((received, started.elapsed()))
}

/// One request on a connection of its own; the whole answer as text.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send request");
    let (answer, _) = until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A connection that reads almost nothing: a tiny receive window, so the
/// server's writes block as soon as the kernel's buffers are full.
async fn non_reader(addr: SocketAddr, path: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    let mut stream = socket.connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: www.example.com\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send request");
    stream
}

/// The value of one metric line (`name{labels}`), 0 when absent.
async fn metric(app: &TestApp, line: &str) -> f64 {
    let addr = app.metrics_addr.unwrap_or(app.addr);
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Polls `check` every 50 ms until it holds; fails after 30 s naming `what`
/// (a bound for a hung test, not a speed: beside five other tests on two
/// cores, 10 s was once too short for a stall to be seen).
async fn eventually<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until a metric reaches `at_least`.
async fn wait_for_metric(app: &TestApp, line: &str, at_least: f64) {
    eventually(&format!("{line} at least {at_least}"), || async {
        metric(app, line).await >= at_least
    })
    .await;
}

fn operators_port(settings: &mut sitemapd::config::Settings) {
    settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
}

#[sqlx::test]
async fn headers_that_never_finish_and_idle_connections_are_closed(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        operators_port(s);
        s.header_read_timeout_ms = 600;
        s.keep_alive_timeout_ms = 300;
    })
    .await;

    // Slowloris: a byte every 100 ms, never the end of the headers.
    let mut slow = TcpStream::connect(app.addr).await.expect("connect");
    let (mut reader, mut writer) = slow.split();
    let trickle = async {
        for byte in b"GET /sitemap_index.xml HTTP/1.1\r\nHost: www.example.com\r\nX-A: " {
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let started = Instant::now();
    let mut sink = Vec::new();
    tokio::select! {
        () = trickle => panic!("the connection outlived 5 s of trickled headers"),
        _ = reader.read_to_end(&mut sink) => {}
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );

    // A connection that sends nothing, and one that goes quiet after a
    // request, are closed by the keep-alive clock.
    let mut silent = TcpStream::connect(app.addr).await.expect("connect");
    let mut quiet = TcpStream::connect(app.addr).await.expect("connect");
    quiet
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
        .await
        .expect("request");
    let (answer, took) = until_closed(&mut quiet, Duration::from_secs(5))
        .await
        .expect("the idle connection is closed");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    assert!(took < Duration::from_secs(2), "closed after {took:?}");
    let (_, took) = until_closed(&mut silent, Duration::from_secs(5))
        .await
        .expect("the silent connection is closed");
    assert!(took < Duration::from_secs(2), "closed after {took:?}");

    wait_for_metric(
        &app,
        r#"sitemapd_connections_closed_total{reason="header_timeout"}"#,
        1.0,
    )
    .await;
    wait_for_metric(
        &app,
        r#"sitemapd_connections_closed_total{reason="idle"}"#,
        2.0,
    )
    .await;
}

/// Reads one response to `GET /healthz` off a kept-alive connection.
async fn health_answer(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    while !received.ends_with(b"\r\n\r\nok\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .expect("answered within 5 s")
            .expect("read");
        assert!(
            n > 0,
            "closed while answering: {}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&received).into_owned()
}

#[sqlx::test]
async fn a_connection_that_keeps_asking_outlives_both_clocks(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.header_read_timeout_ms = 1_500;
        s.keep_alive_timeout_ms = 1_000;
    })
    .await;
    let request = b"GET /healthz HTTP/1.1\r\nHost: www.example.com\r\n\r\n";
    let mut stream = TcpStream::connect(app.addr).await.expect("connect");
    let opened = Instant::now();

    // Asked again well within the idle timeout, for twice the header
    // timeout: each response's end restarts both clocks.
    while opened.elapsed() < Duration::from_millis(3_000) {
        stream.write_all(request).await.expect("request");
        assert!(health_answer(&mut stream).await.starts_with("HTTP/1.1 200"));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // A head trickled in for most of the header timeout, counted from the
    // last response's end, is answered: each byte moves the idle clock.
    for chunk in request.chunks(6) {
        stream.write_all(chunk).await.expect("request byte");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(health_answer(&mut stream).await.starts_with("HTTP/1.1 200"));

    // Then quiet: closed by the idle clock.
    let (rest, took) = until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("the quiet connection is closed");
    assert!(rest.is_empty());
    assert!(took < Duration::from_secs(3), "closed after {took:?}");
}

#[sqlx::test]
async fn a_client_that_stops_reading_is_dropped_and_gives_its_memory_back(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        operators_port(s);
        s.max_urls = 50_000;
        s.write_stall_timeout_ms = 500;
    })
    .await;
    app.insert_hashed_urls(50_000).await;
    // Megabytes uncompressed: far more than the sockets' buffers hold.
    let mut stalled = non_reader(app.addr, "/sitemap-1.xml").await;
    wait_for_metric(
        &app,
        r#"sitemapd_connections_closed_total{reason="write_stall"}"#,
        1.0,
    )
    .await;
    assert_eq!(metric(&app, "sitemapd_response_memory_bytes").await, 0.0);

    // What the client got is visibly cut short: no end of the document,
    // no end of the chunked body.
    let (received, _) = until_closed(&mut stalled, Duration::from_secs(10))
        .await
        .expect("closed by the server");
    let text = String::from_utf8_lossy(&received);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        &text[..80.min(text.len())]
    );
    assert!(!text.contains("</urlset>"));
    assert!(!text.ends_with("\r\n0\r\n\r\n"));

    // A slow reader that keeps reading is never cut.
    let (page, _) = app.plain_page("/sitemap-1.xml").await;
    assert_eq!(page.urls.len(), 50_000);
}

#[sqlx::test]
async fn response_bodies_share_one_memory_budget(pool: PgPool) {
    let measure = TestApp::spawn_with(pool.clone(), |s| s.max_urls = 50_000).await;
    measure.insert_hashed_urls(50_000).await;
    let gzip_len = measure
        .get("/sitemap-1.xml.gz")
        .await
        .bytes()
        .await
        .expect("page")
        .len() as u64;

    // Room for the page and one uncompressed stream's buffers, not two.
    let app = TestApp::spawn_with(pool, |s| {
        operators_port(s);
        s.max_urls = 50_000;
        s.write_stall_timeout_ms = 60_000;
        s.response_memory_bytes = gzip_len + 300 * 1024;
    })
    .await;
    let mut first = non_reader(app.addr, "/sitemap-1.xml").await;
    let mut head = [0u8; 12];
    first.read_exact(&mut head).await.expect("status line");
    assert_eq!(&head, b"HTTP/1.1 200");

    // A fresh connection: the pooled one has idled for as long as the page
    // took to build, and the server may close it as the request is sent.
    let refused = crate::helpers::client()
        .get(app.url("/sitemap-1.xml"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().get("retry-after").is_some());
    assert_eq!(refused.headers()["cache-control"], "no-store");
    // The same page compressed is held already: it costs nothing more.
    assert_eq!(app.get("/sitemap-1.xml.gz").await.status(), 200);
    assert_eq!(
        metric(
            &app,
            r#"sitemapd_responses_refused_total{reason="response_memory"}"#
        )
        .await,
        1.0
    );

    // The first client goes away: its share comes back.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // A fresh connection each time: the server may close an idle
        // kept-alive one as the request is sent, as it may any client's.
        let response = crate::helpers::client()
            .get(app.url("/sitemap-1.xml"))
            .send()
            .await
            .expect("request sent");
        if response.status() == 200 {
            assert!(
                response
                    .text()
                    .await
                    .expect("page")
                    .ends_with("</urlset>\n")
            );
            break;
        }
        assert!(Instant::now() < deadline, "the budget never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[sqlx::test]
async fn past_max_connections_health_still_answers_and_the_rest_get_503(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        operators_port(s);
        s.max_connections = 2;
    })
    .await;
    // An index to serve: a site with no URL has none.
    app.insert_urls("", "page-", 1).await;
    app.fold().await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(app.addr).await.expect("connect"));
    }
    wait_for_metric(&app, r#"sitemapd_connections_open{tier="regular"}"#, 2.0).await;

    let health = exchange(app.addr, "GET /healthz HTTP/1.1\r\nHost: a.example\r\n\r\n").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let ready = exchange(app.addr, "GET /readyz HTTP/1.1\r\nHost: a.example\r\n\r\n").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let shed = exchange(
        app.addr,
        "GET /sitemap_index.xml HTTP/1.1\r\nHost: a.example\r\n\r\n",
    )
    .await;
    assert!(shed.starts_with("HTTP/1.1 503"), "{shed}");
    let shed = shed.to_ascii_lowercase();
    assert!(
        shed.contains("retry-after:") && shed.contains("connection: close"),
        "{shed}"
    );

    // Fill the overflow too: the next connection is answered and closed at
    // once, while the operators' port answers as ever. Connections are
    // accepted in the order they connect, so the next one finds the overflow
    // full without waiting to see its gauge: a scrape on a busy machine
    // could take longer than the 2 s an overflow connection without a
    // request is kept.
    for _ in 0..app.overflow_connections {
        held.push(TcpStream::connect(app.addr).await.expect("connect"));
    }
    let mut refused = TcpStream::connect(app.addr).await.expect("connect");
    let (answer, took) = until_closed(&mut refused, Duration::from_secs(5))
        .await
        .expect("closed at once");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too many connections"), "{answer}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let operators = app.metrics_addr.expect("operators' port");
    for path in ["/healthz", "/readyz"] {
        let response = reqwest::get(format!("http://{operators}{path}"))
            .await
            .expect("answered");
        assert_eq!(response.status(), 200, "{path}");
    }
    assert!(
        metric(
            &app,
            r#"sitemapd_connections_closed_total{reason="refused"}"#
        )
        .await
            >= 1.0
    );
    assert!(
        metric(
            &app,
            r#"sitemapd_connections_closed_total{reason="over_capacity"}"#
        )
        .await
            >= 3.0
    );

    // Once the flood goes, connections are served in full again.
    drop(held);
    eventually("served in full again", || async {
        app.get("/sitemap_index.xml").await.status() == 200
    })
    .await;
}

#[sqlx::test]
async fn a_missing_repeated_or_malformed_host_is_a_400(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    // An index to serve: a site with no URL has none.
    app.insert_urls("", "page-", 1).await;
    app.fold().await;
    for (request, why) in [
        ("GET /sitemap_index.xml HTTP/1.1\r\n\r\n", "needs a Host"),
        (
            "GET /sitemap_index.xml HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
            "more than one Host",
        ),
        (
            "GET /sitemap_index.xml HTTP/1.1\r\nHost: a b.example\r\n\r\n",
            "not a valid host",
        ),
        (
            "GET /sitemap_index.xml HTTP/1.1\r\nHost: user@a.example\r\n\r\n",
            "not a valid host",
        ),
    ] {
        let answer = exchange(app.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{request:?}: {answer}");
        assert!(answer.contains(why), "{request:?}: {answer}");
    }
    // HTTP/1.0 has no Host requirement.
    let answer = exchange(app.addr, "GET /sitemap_index.xml HTTP/1.0\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
}

#[test]
fn the_open_files_limit_is_raised_to_the_hard_limit_and_logged() {
    let hard = std::process::Command::new("bash")
        .args(["-c", "ulimit -Hn"])
        .output()
        .expect("bash runs");
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_owned();
    // The service stops at once on a database that does not answer, after
    // it has raised and logged the limit.
    let output = std::process::Command::new("bash")
        .args([
            "-c",
            "ulimit -Sn 256 && exec \"$0\" serve",
            env!("CARGO_BIN_EXE_sitemapd"),
        ])
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env("SITEMAPD_DB_ACQUIRE_TIMEOUT_MS", "200")
        .env("RUST_LOG", "info")
        .env("SITEMAPD_LOG_FORMAT", "json")
        .output()
        .expect("the binary runs");
    let log = String::from_utf8_lossy(&output.stderr);
    let fields = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|line| line["fields"].clone())
        .find(|fields| fields["message"] == "open files limit")
        .unwrap_or_else(|| panic!("no open files line in\n{log}"));
    assert_eq!(fields["soft_before"], 256, "{fields}");
    assert_eq!(fields["soft"].to_string(), hard, "{fields}");
    assert_eq!(fields["hard"].to_string(), hard, "{fields}");
}
