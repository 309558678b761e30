#!/usr/bin/env python3
"""Extensions benchmark: a cold page of 50,000 URLs that each carry 5 hreflang
alternates and 3 images, beside its DB read alone and gzip alone; and the
news sitemap (1,000 articles), cold and cached.

Usage (see BENCHMARKS.md, "Extensions"):
    cargo build --release
    scripts/bench_extensions.py --database-url postgres://postgres@127.0.0.1/sitemapd_ext \\
        --out benches/results/extensions.json

Seeds the database itself (dropping and recreating it): 10,000 clusters of
five languages (en, de, fr, es, it), each URL with three images, in one
section; then 1,000 news articles of the last 48 hours in another. Starts the
release binary twice on loopback, with no page cache (cold builds) and with
its default cache, and measures side by side in one run:

- cold builds of the page (`/sitemap-products-1.xml.gz`);
- the page's own SELECT alone (the service's query, via COPY);
- gzip alone (zlib, level 6) of the page's uncompressed bytes;
- the news sitemap cold and cached.

Needs: psycopg (pip). Loopback only, bounded by --rounds.
"""

import argparse
import http.client
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_scale import (  # noqa: E402
    HOST,
    cold_page_summary,
    db_read_seconds,
    ms,
    percentile,
    start_server,
    write_results,
)

BASE_URL = "https://www.example.com/"
LANGUAGES = ["en", "de", "fr", "es", "it"]

def get(port, path, headers=None):
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    started = time.perf_counter()
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    body = response.read()
    took = time.perf_counter() - started
    conn.close()
    if response.status != 200:
        sys.exit(f"GET {path}: {response.status}")
    return took, body


def seed(database_url, binary, log, urls):
    """A fresh database, migrated by the binary, then the rows in SQL."""
    admin = database_url.rsplit("/", 1)[0] + "/postgres"
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    env = dict(os.environ, DATABASE_URL=database_url, SITEMAPD_BASE_URL=BASE_URL)
    subprocess.run([binary, "migrate"], env=env, stdout=log, stderr=log, check=True)
    clusters = urls // len(LANGUAGES)
    started = time.perf_counter()
    with psycopg.connect(database_url) as conn:
        conn.execute(
            """
            INSERT INTO sitemap_urls (section, loc, lastmod, images, hreflang, hreflang_cluster)
            SELECT 'products', %(base)s || l.code || '/p/' || c,
                   timestamptz '2026-01-01' + c * interval '1 minute',
                   jsonb_build_array(
                       jsonb_build_object('loc', 'https://cdn.example.com/' || c || '/1.jpg'),
                       jsonb_build_object('loc', 'https://cdn.example.com/' || c || '/2.jpg'),
                       jsonb_build_object('loc', 'https://cdn.example.com/' || c || '/3.jpg')),
                   ARRAY[l.code], 'p' || c
            FROM generate_series(1, %(clusters)s) c, unnest(%(codes)s::text[]) l(code)
            """,
            {"base": BASE_URL, "clusters": clusters, "codes": LANGUAGES},
        )
        conn.execute(
            """
            INSERT INTO sitemap_urls (section, loc, news)
            SELECT 'articles', %(base)s || 'news/' || a,
                   jsonb_build_object('publication_name', 'The Example Times', 'language', 'en',
                       'title', 'Story number ' || a || ' of the day',
                       'publication_date', to_char((now() - a * interval '2 minutes') AT TIME ZONE 'UTC',
                                                   'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
            FROM generate_series(1, 1000) a
            """,
            {"base": BASE_URL},
        )
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--binary", default="target/release/sitemapd")
    parser.add_argument("--out", required=True, help="JSON results file")
    parser.add_argument("--urls", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=15, help="cold builds, DB reads, gzips")
    parser.add_argument("--news-fetches", type=int, default=200)
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="sitemapd-bench-ext-")
    log = open(os.path.join(workdir, "server.log"), "w")
    results = {"urls": args.urls, "seed_s": round(seed(args.database_url, args.binary, log, args.urls), 1)}
    started = time.perf_counter()
    # The first start folds every row: placement, clusters, news.
    cold = start_server(
        args.binary, args.database_url, BASE_URL, 18092, {"SITEMAPD_PAGE_CACHE_BYTES": "0"}, log
    )
    results["first_fold_s"] = round(time.perf_counter() - started, 1)
    cached = start_server(args.binary, args.database_url, BASE_URL, 18090, {}, log)
    try:
        _, xml = get(18092, "/sitemap-products-1.xml", {"Accept-Encoding": "identity"})
        results["page_xml_mib"] = round(len(xml) / 2**20, 2)
        results["page_urls"] = xml.count(b"<url>")
        results["page_links"] = xml.count(b"<xhtml:link ")
        results["page_images"] = xml.count(b"<image:image>")
        build, db, gz = [], [], []
        with psycopg.connect(args.database_url) as conn:
            for _ in range(args.rounds):
                build.append(get(18092, "/sitemap-products-1.xml.gz")[0])
                db.append(db_read_seconds(conn, "products", 1))
                started = time.perf_counter()
                zlib.compress(xml, 6)
                gz.append(time.perf_counter() - started)
        results["cold_page"] = cold_page_summary(build, db, gz)
        news_cold = [get(18092, "/sitemap_news.xml.gz")[0] for _ in range(args.news_fetches)]
        get(18090, "/sitemap_news.xml.gz")
        news_cached = [get(18090, "/sitemap_news.xml.gz")[0] for _ in range(args.news_fetches)]
        _, news_xml = get(18090, "/sitemap_news.xml", {"Accept-Encoding": "identity"})
        results["news"] = {
            "articles": news_xml.count(b"<url>"),
            "xml_kib": round(len(news_xml) / 1024, 1),
            "cold_median_ms": ms(statistics.median(news_cold)),
            "cold_p99_ms": ms(percentile(news_cold, 99)),
            "cached_median_ms": ms(statistics.median(news_cached)),
            "cached_p99_ms": ms(percentile(news_cached, 99)),
        }
    finally:
        for process in (cold, cached):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    write_results(args.out, results)


if __name__ == "__main__":
    main()
