#!/usr/bin/env python3
"""Fairness: how soon one site's single-row inserts show in its page while
another site's bulk load is placed, beside the same inserts with no load.

    scripts/bench_fairness.py --database-url URL --binary BINARY

Over a database whose sites are rows (scripts/bench_tenants.sh seeds one:
sites t1..tN on https://tN.example.com/), starts `serve` at its defaults on
loopback, then:

1. no load: for --seconds, the probe site (t2) gets one plain-SQL INSERT
   every 100 ms, and a reader polls its page every 20 ms; each insert's
   time from its commit to the first fetch of its page that lists it;
2. load: the load site (t1) gets --rows rows in one plain-SQL COPY, and
   right after it commits the same inserts for the probe site run until
   the service has placed the load (its pages count every row), and at
   least --seconds.

Prints p50 / p99 / max of both, side by side, and the time the service
took to place the load. Needs psycopg (pip install "psycopg[binary]").
"""

import argparse
import http.client
import threading
import time

import psycopg

from bench_service import serving


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


class Probe:
    """Inserts into the probe site and watches its page for each row."""

    def __init__(self, database_url, port, site, host, tag):
        self.database_url = database_url
        self.port = port
        self.site = site
        self.host = host
        self.tag = tag
        self.pending = {}
        self.latencies = []
        self.lock = threading.Lock()
        self.writing = True

    def write(self, seconds, until=lambda: True):
        started = time.monotonic()
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            n = 0
            while time.monotonic() - started < seconds or not until():
                n += 1
                loc = f"https://{self.host}/{self.tag}/{n}"
                conn.execute(
                    "INSERT INTO sitemap_urls (site, loc) VALUES (%s, %s)", (self.site, loc)
                )
                with self.lock:
                    self.pending[loc] = time.monotonic()
                time.sleep(max(0.0, started + n * 0.1 - time.monotonic()))
        self.writing = False

    def read(self, timeout):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        deadline = None
        while True:
            with self.lock:
                waiting = bool(self.pending)
            if not self.writing and not waiting:
                return
            if not self.writing:
                deadline = deadline or time.monotonic() + timeout
                if time.monotonic() > deadline:
                    raise SystemExit(f"{len(self.pending)} rows never showed in {timeout} s")
            conn.request("GET", "/sitemap-1.xml", headers={"Host": self.host})
            response = conn.getresponse()
            body = response.read().decode()
            fetched = time.monotonic()
            if response.status == 200:
                with self.lock:
                    for loc in [loc for loc in self.pending if f"<loc>{loc}</loc>" in body]:
                        self.latencies.append(fetched - self.pending.pop(loc))
            time.sleep(0.02)

    def run(self, seconds, until=lambda: True, timeout=600):
        writer = threading.Thread(target=self.write, args=(seconds, until))
        writer.start()
        self.read(timeout)
        writer.join()
        return self.latencies


def copy_load(database_url, site, host, rows):
    with psycopg.connect(database_url) as conn:
        with conn.cursor().copy("COPY sitemap_urls (site, loc) FROM STDIN") as copy:
            chunk = 100_000
            for start in range(1, rows + 1, chunk):
                copy.write("".join(
                    f"{site}\thttps://{host}/load/{n}\n"
                    for n in range(start, min(rows, start + chunk - 1) + 1)
                ))
        conn.commit()


def urls_on_pages(database_url, site):
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(
            "SELECT coalesce(sum(url_count), 0) FROM sitemap_pages WHERE site = %s", (site,)
        ).fetchone()[0]


def summary(latencies):
    return (f"p50 {percentile(latencies, 0.5):.3f} s, p99 {percentile(latencies, 0.99):.3f} s, "
            f"max {max(latencies):.3f} s ({len(latencies)} inserts)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--load-site", default="t1")
    parser.add_argument("--probe-site", default="t2")
    args = parser.parse_args()
    load_host = f"{args.load_site}.example.com"
    probe_host = f"{args.probe_site}.example.com"

    with serving(args.binary, args.database_url, args.port):
        quiet = Probe(args.database_url, args.port, args.probe_site, probe_host, "quiet").run(
            args.seconds)
        print(f"no load: {summary(quiet)}", flush=True)

        before = urls_on_pages(args.database_url, args.load_site)
        started = time.monotonic()
        copy_load(args.database_url, args.load_site, load_host, args.rows)
        committed = time.monotonic()
        print(f"COPY of {args.rows:,} rows into {args.load_site} committed in "
              f"{committed - started:.1f} s", flush=True)
        placed_at = []

        def placed():
            if not placed_at and urls_on_pages(args.database_url, args.load_site) >= before + args.rows:
                placed_at.append(time.monotonic())
            return bool(placed_at)

        loaded = Probe(args.database_url, args.port, args.probe_site, probe_host, "loaded").run(
            args.seconds, until=placed)
        print(f"the load placed by the service {placed_at[0] - committed:.1f} s after its commit",
              flush=True)
        print(f"during the load: {summary(loaded)}")
        print(f"p99 during the load / without it: "
              f"{percentile(loaded, 0.99) / percentile(quiet, 0.99):.2f}x")


if __name__ == "__main__":
    main()
