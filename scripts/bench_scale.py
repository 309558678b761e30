#!/usr/bin/env python3
"""Scale benchmark: one seeded database, every figure of BENCHMARKS.md.

Usage (see BENCHMARKS.md):
    sitemapd demo --urls 1000000 --sections blog,products,news   # into $DB
    scripts/bench_scale.py --database-url $DB --label 1M --out benches/results/1m.json

Starts the release binary on loopback (twice: with the default page cache,
and with none, for cold builds), and nginx serving the same page from disk,
then measures, side by side in one run:

- the index: median and p99 of sequential fetches;
- a full crawl (index, then every page once, cold): total and pages/s
  (or its first --crawl-pages pages, for tables of thousands of pages);
- one row changed by plain SQL, from its commit until its page serves it;
- cold page builds beside the database read alone (the page's own SELECT,
  via COPY) and gzip alone (zlib, the configured level) of the same page;
- cached page and 304 throughput with 16 and 64 connections (wrk), beside
  nginx serving the same file;
- the server's peak RSS (VmHWM) over all of it.

Needs: wrk, nginx (Debian packages), psycopg (pip). Loopback only; every
load run is bounded by --seconds.
"""

import argparse
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET
import zlib

import psycopg
from psycopg import sql

NS = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
HOST = "127.0.0.1"


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ms(seconds):
    return round(seconds * 1000, 2)


class Client:
    """One keep-alive connection, as a crawler holds."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection(HOST, port, timeout=120)

    def get(self, path, headers=None):
        started = time.perf_counter()
        try:
            self.conn.request("GET", path, headers=headers or {})
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The server closes a connection idle past keep_alive_timeout_ms;
            # a crawler then opens a new one.
            self.conn.close()
            started = time.perf_counter()
            self.conn.request("GET", path, headers=headers or {})
            response = self.conn.getresponse()
        body = response.read()
        took = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status}")
        return took, body, response


def start_server(binary, database_url, base_url, port, extra_env, log):
    # Logging as deployed: RUST_LOG unset.
    env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"}
    env.update(
        {
            "DATABASE_URL": database_url,
            "SITEMAPD_LISTEN": f"{HOST}:{port}",
            "SITEMAPD_METRICS_LISTEN": f"{HOST}:{port + 1000}",
            # As seeded: another base URL would re-check every row's scope.
            "SITEMAPD_BASE_URL": base_url,
            "SITEMAPD_WARM_UP_INTERVAL_MS": "0",
        }
    )
    env.update(extra_env)
    process = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=log)
    for _ in range(600):
        if process.poll() is not None:
            sys.exit(f"sitemapd on port {port} exited at start (see {log.name})")
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=1)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return process
        except OSError:
            pass
        time.sleep(0.1)
    process.kill()
    sys.exit(f"sitemapd did not start on port {port}")


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def start_nginx(root, port, workdir):
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(
            f"""
worker_processes auto;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log;
daemon off;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    types {{ application/gzip gz; }}
    server {{
        listen {HOST}:{port};
        root {root};
    }}
}}
"""
        )
    process = subprocess.Popen(["nginx", "-c", conf, "-p", workdir], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return process


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "B": 1 / 2**20, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0}


def wrk(url, connections, seconds, headers=()):
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    for header in headers:
        command += ["-H", header]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout

    def value(pattern):
        number, unit = re.search(pattern, out).groups()
        return float(number) * UNITS[unit]

    return {
        "rps": round(float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))),
        "mib_s": round(value(r"Transfer/sec:\s+([\d.]+)(B|KB|MB|GB)"), 1),
        "p50_ms": round(value(r"\s50%\s+([\d.]+)(us|ms|s)"), 3),
        "p99_ms": round(value(r"\s99%\s+([\d.]+)(us|ms|s)"), 3),
    }


def page_of(page_path):
    """A page's (section, page) from its file name."""
    name = page_path.rsplit("/", 1)[-1].removesuffix(".xml.gz")
    parts = name.split("-")
    section, page = ("-".join(parts[1:-1]), int(parts[-1]))
    return section, page


# The service's own page query (`Store::page_rows`): placements joined to
# their rows, to the cluster for hreflang and to the lastmod clamps.
PAGE_QUERY = """
SELECT u.id, u.loc,
       sitemap_served_lastmod(u.lastmod, c.written_lastmod, c.served_lastmod) AS lastmod,
       u.changefreq, u.priority, u.updated_at,
       u.images::text AS images, u.videos::text AS videos,
       k.hreflangs, k.hrefs, p.bytes AS reserved
FROM sitemap_placed p JOIN sitemap_urls u ON u.id = p.id
LEFT JOIN sitemap_clusters k ON k.cluster = p.cluster AND k.problem IS NULL
LEFT JOIN sitemap_lastmod_clamps c ON c.id = u.id
WHERE p.site = 'default' AND p.section = {} AND p.page = {}
  AND u.site = p.site AND u.section = p.section
  AND sitemap_loc_hash(u.loc) = p.loc_hash
ORDER BY p.id
"""


def db_read_seconds(conn, section, page):
    """The page's rows read alone, streamed to the client by COPY."""
    query = sql.SQL("COPY (" + PAGE_QUERY + ") TO STDOUT").format(
        sql.Literal(section), sql.Literal(page)
    )
    started = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy(query) as copy:
            for _ in copy:
                pass
    return time.perf_counter() - started


def one_row_change(client, conn, path, runs):
    """Seconds from the commit of a new lastmod on one row of page `path`
    until the served page carries it, fetched as a crawler would (each
    fetch of the changed page is a cold build)."""
    section, page = page_of(path)
    row = conn.execute(
        "SELECT id FROM sitemap_placed WHERE site = 'default' AND section = %s AND page = %s"
        " ORDER BY id LIMIT 1",
        (section, page),
    ).fetchone()[0]
    took = []
    for run in range(runs):
        lastmod = datetime.datetime.now(datetime.timezone.utc).replace(
            microsecond=0
        ) - datetime.timedelta(days=1, seconds=run)
        served = lastmod.strftime("<lastmod>%Y-%m-%dT%H:%M:%S+00:00</lastmod>").encode()
        conn.execute("UPDATE sitemap_urls SET lastmod = %s WHERE id = %s", (lastmod, row))
        committed = time.perf_counter()
        while served not in zlib.decompress(client.get(path)[1], wbits=31):
            if time.perf_counter() - committed > 120:
                sys.exit(f"{path}: the changed row was not served within 120 s")
            time.sleep(0.01)
        took.append(time.perf_counter() - committed)
    return {"median_ms": ms(statistics.median(took)), "max_ms": ms(max(took)), "runs": runs}


def cold_page_summary(build, db, gz):
    """A cold build's figures beside its DB read and gzip alone, each timed
    in the same rounds: medians and p99, and the build's ratio to the larger
    of the two parts (what a build that overlaps them fully would take) and
    to their sum."""
    alone = [d + g for d, g in zip(db, gz)]
    return {
        "median_ms": ms(statistics.median(build)),
        "p99_ms": ms(percentile(build, 99)),
        "db_read_median_ms": ms(statistics.median(db)),
        "db_read_p99_ms": ms(percentile(db, 99)),
        "gzip_median_ms": ms(statistics.median(gz)),
        "gzip_p99_ms": ms(percentile(gz, 99)),
        "alone_median_ms": ms(statistics.median(alone)),
        "ratio_to_max": round(
            statistics.median(build) / max(statistics.median(db), statistics.median(gz)), 2
        ),
        "p99_ratio_to_max": round(
            percentile(build, 99) / max(percentile(db, 99), percentile(gz, 99)), 2
        ),
        "ratio": round(statistics.median(build) / statistics.median(alone), 2),
    }


def write_results(path, results):
    """The results as JSON, to `path` and to stdout."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--label", required=True, help="table size, e.g. 1M")
    parser.add_argument("--binary", default="target/release/sitemapd")
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/", help="the one demo seeded with")
    parser.add_argument("--out", required=True, help="JSON results file")
    parser.add_argument("--index-fetches", type=int, default=200)
    parser.add_argument("--crawl-pages", type=int, default=None, help="crawl only the first N pages")
    parser.add_argument("--sample-pages", type=int, default=12, help="pages timed cold, db and gzip")
    parser.add_argument("--rounds", type=int, default=3, help="cold builds per sampled page")
    parser.add_argument("--seconds", type=int, default=8, help="each wrk run")
    parser.add_argument("--gzip-level", type=int, default=None, help="as configured (default: built-in)")
    args = parser.parse_args()
    for tool in ("wrk", "nginx"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (apt-get install {tool})")

    workdir = tempfile.mkdtemp(prefix="sitemapd-bench-")
    log = open(os.path.join(workdir, "server.log"), "w")
    extra = {} if args.gzip_level is None else {"SITEMAPD_GZIP_LEVEL": str(args.gzip_level)}
    level = args.gzip_level if args.gzip_level is not None else 6
    results = {"label": args.label}
    server = cold = nginx = None
    try:
        server = start_server(args.binary, args.database_url, args.base_url, 18080, extra, log)
        cold = start_server(
            args.binary,
            args.database_url,
            args.base_url,
            18082,
            {**extra, "SITEMAPD_PAGE_CACHE_BYTES": "0"},
            log,
        )
        client = Client(18080)
        # The index, warm.
        times = []
        for _ in range(args.index_fetches):
            took, index, _ = client.get("/sitemap_index.xml")
            times.append(took)
        pages = [
            urllib.parse.urlsplit(loc.text).path
            for loc in ET.fromstring(index).findall("s:sitemap/s:loc", NS)
        ]
        with psycopg.connect(args.database_url) as conn:
            rows = conn.execute("SELECT count(*) FROM sitemap_urls").fetchone()[0]
        results.update(rows=rows, pages=len(pages))
        results["index"] = {"median_ms": ms(statistics.median(times)), "p99_ms": ms(percentile(times, 99))}

        # The full crawl, cold, as a crawler's weekly visit.
        crawled = pages[: args.crawl_pages]
        started = time.perf_counter()
        client.get("/sitemap_index.xml")
        gz_bytes = 0
        for path in crawled:
            _, body, _ = client.get(path)
            gz_bytes += len(body)
        crawl = time.perf_counter() - started
        results["crawl"] = {
            "pages": len(crawled),
            "seconds": round(crawl, 2),
            "pages_per_s": round(len(crawled) / crawl, 2),
            "gzip_mib": round(gz_bytes / 2**20, 1),
        }

        # One row changed, from its commit until its page serves it.
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            results["one_row_change"] = one_row_change(client, conn, pages[0], 5)

        # Cold builds beside the database read and gzip alone.
        step = max(1, len(pages) // args.sample_pages)
        sample = pages[::step][: args.sample_pages]
        cold_client = Client(18082)
        build, db, gz = [], [], []
        with psycopg.connect(args.database_url) as conn:
            for path in sample:
                section, page = page_of(path)
                _, xml, _ = cold_client.get(path.removesuffix(".gz"))
                for _ in range(args.rounds):
                    build.append(cold_client.get(path)[0])
                    db.append(db_read_seconds(conn, section, page))
                    started = time.perf_counter()
                    zlib.compress(xml, level)
                    gz.append(time.perf_counter() - started)
        results["cold_page"] = {
            **cold_page_summary(build, db, gz),
            "gzip_level": level,
            "xml_mib": round(len(xml) / 2**20, 2),
        }

        # Cached pages and 304s, beside nginx serving the same file.
        path = pages[0]
        _, body, response = client.get(path)
        etag = response.getheader("ETag")
        root = os.path.join(workdir, "root")
        os.makedirs(root)
        # nginx's workers run as another user.
        os.chmod(workdir, 0o755)
        with open(os.path.join(root, path.lstrip("/")), "wb") as f:
            f.write(body)
        nginx = start_nginx(root, 18081, workdir)
        nginx_etag = Client(18081).get(path)[2].getheader("ETag")
        results["page_bytes"] = len(body)
        for connections in (16, 64):
            for name, port, tag in (("sitemapd", 18080, etag), ("nginx", 18081, nginx_etag)):
                url = f"http://{HOST}:{port}{path}"
                results[f"cached_c{connections}_{name}"] = wrk(url, connections, args.seconds)
                results[f"304_c{connections}_{name}"] = wrk(
                    url, connections, args.seconds, [f"If-None-Match: {tag}"]
                )
        for kind in ("cached", "304"):
            for connections in (16, 64):
                ours = results[f"{kind}_c{connections}_sitemapd"]["rps"]
                theirs = results[f"{kind}_c{connections}_nginx"]["rps"]
                results[f"{kind}_c{connections}_ratio"] = round(ours / theirs, 2)
        results["peak_rss_mib"] = peak_rss_mib(server.pid)
        results["peak_rss_mib_cold_server"] = peak_rss_mib(cold.pid)
    finally:
        for process in (server, cold, nginx):
            if process is not None:
                process.send_signal(signal.SIGTERM if process is not nginx else signal.SIGQUIT)
                process.wait(timeout=60)
    write_results(args.out, results)


if __name__ == "__main__":
    main()
