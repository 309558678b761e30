#!/usr/bin/env python3
"""Isolation: one tenant writes 100 changes/s while a crawler revalidates the
indexes and pages of 10,000 others; how many database reads serving makes.

    scripts/bench_tenant_isolation.py --database-url URL --binary BINARY

Over a database whose sites are rows (scripts/bench_tenants.sh seeds one:
sites t1..tN on https://tN.example.com/, a page each), starts `serve` at its
defaults on loopback, fetches the index and first page of sites t2..t10001
once (the crawler's last visit), then runs the same --seconds twice:

A. the busy tenant (t1) alone: an UPDATE of one of its rows every 10 ms;
B. the busy tenant, and beside it the crawler: 8 clients asking for those
   sites' indexes and pages with the ETags they were given (304s) and for
   their pages without (cached 200s).

Prints the requests and their answers, and the service's database reads
(sitemapd_database_reads_total: summaries, sites, pages) in A and in B:
what B adds is what the crawler's requests cost the database. Needs psycopg
(pip install "psycopg[binary]").
"""

import argparse
import collections
import http.client
import re
import threading
import time

import psycopg

from bench_service import serving

PAGE = "/sitemap-1.xml.gz"


def database_reads(metrics_port):
    conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10)
    conn.request("GET", "/metrics")
    response = conn.getresponse()
    text = response.read().decode()
    assert response.status == 200 and "sitemapd_database_reads_total" in text, text[:200]
    reads = {"summaries": 0, "sites": 0, "pages": 0}
    for read, value in re.findall(r'^sitemapd_database_reads_total\{read="(\w+)"\} (\d+)', text, re.M):
        reads[read] = int(value)
    return reads


def busy_tenant(database_url, stop):
    with psycopg.connect(database_url, autocommit=True) as conn:
        n = 0
        started = time.monotonic()
        while not stop.is_set():
            n += 1
            conn.execute(
                "UPDATE sitemap_urls SET lastmod = now() WHERE site = 't1' AND loc = %s",
                (f"https://t1.example.com/p/{n % 100 + 1}",),
            )
            time.sleep(max(0.0, started + n * 0.01 - time.monotonic()))
    return n


def crawler(port, validators, stop, answers, lock):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    seen = collections.Counter()
    i = 0
    while not stop.is_set():
        host, index_etag, page_etag = validators[i % len(validators)]
        for path, headers in (
            ("/sitemap_index.xml", {"If-None-Match": index_etag}),
            (PAGE, {"If-None-Match": page_etag}),
            (PAGE, {}),
        ):
            conn.request("GET", path, headers={"Host": host, **headers})
            response = conn.getresponse()
            response.read()
            seen[(path, "conditional" if headers else "plain", response.status)] += 1
        i += 1
    with lock:
        answers.update(seen)


def run(database_url, port, seconds, validators=None):
    stop = threading.Event()
    before = database_reads(port + 1)
    answers, lock = collections.Counter(), threading.Lock()
    threads = [threading.Thread(target=busy_tenant, args=(database_url, stop))]
    if validators:
        share = len(validators) // 8
        threads += [
            threading.Thread(target=crawler,
                             args=(port, validators[k * share:(k + 1) * share], stop, answers, lock))
            for k in range(8)
        ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    # The folds of the last changes, and their warm-up, are in the count.
    time.sleep(2)
    after = database_reads(port + 1)
    return {k: after[k] - before[k] for k in after}, answers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--sites", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--port", type=int, default=18080)
    args = parser.parse_args()

    with serving(args.binary, args.database_url, args.port):
        validators = []
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
        for n in range(2, args.sites + 2):
            host = f"t{n}.example.com"
            etags = []
            for path in ("/sitemap_index.xml", PAGE):
                conn.request("GET", path, headers={"Host": host})
                response = conn.getresponse()
                response.read()
                assert response.status == 200, (host, path, response.status)
                etags.append(response.getheader("ETag"))
            validators.append((host, *etags))
        print(f"visited {len(validators):,} sites' indexes and first pages once", flush=True)

        alone, _ = run(args.database_url, args.port, args.seconds)
        print(f"A. t1 writing 100 changes/s alone, {args.seconds} s: database reads {alone}",
              flush=True)
        beside, answers = run(args.database_url, args.port, args.seconds, validators)
        total = sum(answers.values())
        print(f"B. the same, and the crawler: {total:,} requests ({total / args.seconds:,.0f}/s): "
              + ", ".join(f"{path} {kind} {status}: {n:,}"
                          for (path, kind, status), n in sorted(answers.items())))
        print(f"   database reads {beside}; the crawler's requests added "
              f"{ {k: beside[k] - alone[k] for k in beside} }")


if __name__ == "__main__":
    main()
