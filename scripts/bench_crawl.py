#!/usr/bin/env python3
"""Crawl benchmark: fetch every page a running sitemapd lists, as a crawler
does, and time `gzip -6` alone on the same uncompressed bytes in the same run.

Usage (see BENCHMARKS.md, "Rerunning"):
    sitemapd demo --urls 1000000 && sitemapd serve &
    scripts/bench_crawl.py http://127.0.0.1:8080 --rounds 5

Reports per-page fetch time (median, p99) of `/sitemap-N.xml.gz`, which is
the database read, XML writing and gzip level `gzip_level` of one page, beside
the time `gzip -6` takes on that page's uncompressed XML, and their ratio.
Loopback only; bounded by the number of pages times --rounds.
"""

import argparse
import gzip
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

NS = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}


def fetch(url):
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - started, body


def gzip6_seconds(xml):
    started = time.perf_counter()
    subprocess.run(["gzip", "-6", "-c"], input=xml, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", help="where sitemapd listens, e.g. http://127.0.0.1:8080")
    parser.add_argument("--rounds", type=int, default=3, help="times every page is fetched")
    args = parser.parse_args()
    host = urllib.parse.urlsplit(args.server).hostname
    if host not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("benchmarks target loopback only")

    index_seconds, index = fetch(f"{args.server}/sitemap_index.xml")
    pages = [urllib.parse.urlsplit(loc.text).path for loc in ET.fromstring(index).findall("s:sitemap/s:loc", NS)]
    if not pages:
        sys.exit("the index lists no pages: seed with `sitemapd demo --urls N` first")

    page_times, gzip_times, urls, xml_bytes, gz_bytes = [], [], 0, 0, 0
    crawl_started = time.perf_counter()
    for round_number in range(args.rounds):
        for path in pages:
            seconds, body = fetch(f"{args.server}{path}")
            xml = gzip.decompress(body)
            page_times.append(seconds)
            gzip_times.append(gzip6_seconds(xml))
            if round_number == 0:
                urls += xml.count(b"<url>")
                xml_bytes += len(xml)
                gz_bytes += len(body)
    crawl_seconds = time.perf_counter() - crawl_started

    ms = lambda s: f"{s * 1000:.1f} ms"
    page_median, gzip_median = statistics.median(page_times), statistics.median(gzip_times)
    print(f"pages: {len(pages)}, URLs: {urls}, uncompressed: {xml_bytes / 1e6:.1f} MB, gzip: {gz_bytes / 1e6:.1f} MB")
    print(f"index: {ms(index_seconds)} (one fetch)")
    print(f"samples: {len(page_times)} ({args.rounds} rounds)")
    print(f"page fetch (.xml.gz): median {ms(page_median)}, p99 {ms(percentile(page_times, 99))}")
    print(f"gzip -6 alone, same bytes: median {ms(gzip_median)}, p99 {ms(percentile(gzip_times, 99))}")
    print(f"ratio page / gzip -6 (medians): {page_median / gzip_median:.2f}")
    print(f"crawl incl. gzip -6 timing: {crawl_seconds:.1f} s")


if __name__ == "__main__":
    main()
