//! `.xml` documents are compressed on the wire only as the client asks;
//! `.xml.gz` files never are. Checked with curl itself, and per encoding.

use std::io::Read;
use std::process::Command;

use sqlx::PgPool;

use crate::helpers::{TestApp, gunzip, header};

/// Runs curl off the test's one runtime thread, which the server needs.
async fn curl(args: &[&str], url: &str) -> Vec<u8> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let output = Command::new("curl")
            .args(["--silent", "--show-error", "--fail", "--max-time", "30"])
            .args(&args)
            .arg(&url)
            .output()
            .expect("curl runs (Debian package curl)");
        assert!(
            output.status.success(),
            "curl {args:?} {url}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    })
    .await
    .expect("curl finished")
}

#[sqlx::test]
async fn curl_compressed_and_plain_clients_get_the_same_documents(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "page/", 2000).await;
    let (_, xml) = app.plain_page("/sitemap-1.xml").await;
    let index = app
        .get("/sitemap_index.xml")
        .await
        .bytes()
        .await
        .expect("index")
        .to_vec();

    assert_eq!(curl(&[], &app.url("/sitemap-1.xml")).await, xml);
    assert_eq!(
        curl(&["--compressed"], &app.url("/sitemap-1.xml")).await,
        xml
    );
    assert_eq!(
        curl(&["--compressed"], &app.url("/sitemap_index.xml")).await,
        index
    );
    // The gzip file comes through untouched, compressed or not, and is whole.
    let gz = curl(&["--compressed"], &app.url("/sitemap-1.xml.gz")).await;
    assert_eq!(gz, curl(&[], &app.url("/sitemap-1.xml.gz")).await);
    assert_eq!(gunzip(&gz), xml);
}

#[sqlx::test]
async fn each_encoding_decodes_to_the_document_and_has_its_own_etag(pool: PgPool) {
    // 200 pages of 10, so the index too is large enough to compress well.
    let app = TestApp::spawn_with(pool, |s| s.max_urls = 10).await;
    app.insert_urls("", "page/", 2000).await;
    for path in ["/sitemap-1.xml", "/sitemap_index.xml"] {
        let identity = app.get(path).await;
        assert_eq!(header(&identity, "vary"), "accept-encoding");
        assert!(identity.headers().get("content-encoding").is_none());
        let identity_etag = header(&identity, "etag").to_owned();
        let document = identity.bytes().await.expect("body").to_vec();

        let mut etags = vec![identity_etag];
        for encoding in ["gzip", "br", "zstd"] {
            let response = app
                .get_as("127.0.0.1", path, &[("accept-encoding", encoding)])
                .await;
            assert_eq!(header(&response, "content-encoding"), encoding, "{path}");
            assert_eq!(header(&response, "vary"), "accept-encoding");
            assert_eq!(
                header(&response, "content-type"),
                "application/xml; charset=utf-8"
            );
            let etag = header(&response, "etag").to_owned();
            let body = response.bytes().await.expect("body");
            assert!(
                body.len() < document.len() / 3,
                "{path} {encoding}: {} bytes",
                body.len()
            );
            let mut decoded = Vec::new();
            match encoding {
                "gzip" => decoded = gunzip(&body),
                "br" => {
                    brotli::Decompressor::new(&body[..], 4096)
                        .read_to_end(&mut decoded)
                        .expect("brotli");
                }
                _ => decoded = zstd::decode_all(&body[..]).expect("zstd"),
            }
            assert_eq!(decoded, document, "{path} {encoding}");

            let revalidated = app
                .get_as(
                    "127.0.0.1",
                    path,
                    &[("accept-encoding", encoding), ("if-none-match", &etag)],
                )
                .await;
            assert_eq!(revalidated.status(), 304, "{path} {encoding}");
            assert_eq!(header(&revalidated, "vary"), "accept-encoding");
            etags.push(etag);
        }
        let distinct: std::collections::HashSet<&String> = etags.iter().collect();
        assert_eq!(distinct.len(), 4, "{path}: {etags:?}");
    }
}

#[sqlx::test]
async fn gzip_files_are_never_compressed_again(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    app.insert_urls("", "page/", 100).await;
    let plain = app.get("/sitemap-1.xml.gz").await;
    let etag = header(&plain, "etag").to_owned();
    let bytes = plain.bytes().await.expect("body");
    for encoding in ["gzip", "br", "zstd", "gzip, br, zstd"] {
        let response = app
            .get_as(
                "127.0.0.1",
                "/sitemap-1.xml.gz",
                &[("accept-encoding", encoding)],
            )
            .await;
        assert_eq!(header(&response, "content-type"), "application/gzip");
        assert!(
            response.headers().get("content-encoding").is_none(),
            "{encoding}"
        );
        assert!(response.headers().get("vary").is_none());
        assert_eq!(header(&response, "etag"), etag);
        assert_eq!(response.bytes().await.expect("body"), bytes);
    }
}
