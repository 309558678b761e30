#!/usr/bin/env bash
# What reading from a hot standby costs: a primary and its standby
# (initdb, pg_basebackup -R) on loopback ports, ROWS demo rows (pages of
# 50,000 URLs), then `serve` with no page cache (every fetch a cold build)
# twice side by side, its reads on the primary and on the standby
# (database_read_url); each fetches /sitemap-1.xml.gz FETCHES times, the
# two alternating, and p50 / p99 of each are printed.
#
#   scripts/bench_standby_reads.sh [--rows N] [--fetches N] BINARY
#
# Needs PostgreSQL's server packages (/usr/lib/postgresql/*/bin), curl and
# python3; run as root, the server's commands run as `postgres`. Listens on
# 127.0.0.1:18080-18083 and 25432-25433 only.
set -euo pipefail

rows=300000
fetches=40
while (($#)); do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --fetches) fetches=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: $0 [--rows N] [--fetches N] BINARY" >&2; exit 2; }
binary=$(realpath "$1")
source "$(dirname "$0")/clusters.sh"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    clusters_stop_all
}
trap cleanup EXIT

cluster_primary primary 25432
export RUST_LOG=warn SITEMAPD_BASE_URL=https://www.example.com/
DATABASE_URL=postgres://postgres@127.0.0.1:25432/sitemapd "$binary" demo --urls "$rows" >/dev/null
psql -q postgres://postgres@127.0.0.1:25432/sitemapd -c "VACUUM ANALYZE"
cluster_standby standby 25433 25432 -c hot_standby_feedback=on

# Port 18080 reads on the primary, 18082 on the standby.
for port in 18080 18082; do
    read_url=()
    ((port == 18082)) && read_url=(env DATABASE_READ_URL=postgres://postgres@127.0.0.1:25433/sitemapd)
    "${read_url[@]}" env DATABASE_URL=postgres://postgres@127.0.0.1:25432/sitemapd \
        SITEMAPD_LISTEN=127.0.0.1:$port SITEMAPD_METRICS_LISTEN=127.0.0.1:$((port + 1)) \
        SITEMAPD_PAGE_CACHE_BYTES=0 SITEMAPD_WARM_UP_INTERVAL_MS=0 \
        "$binary" serve >"$cluster_work/serve-$port.log" 2>&1 &
    pids+=($!)
done
for port in 18080 18082; do
    until curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"; do sleep 0.05; done
done
until curl -s "http://127.0.0.1:18083/metrics" | grep -q 'sitemapd_read_server{server="standby"} 1'; do
    sleep 0.1
done

python3 - "$fetches" <<'PY'
import http.client, sys, time
fetches = int(sys.argv[1])
took = {18080: [], 18082: []}
conns = {port: http.client.HTTPConnection("127.0.0.1", port, timeout=60) for port in took}
for _ in range(fetches):
    for port, conn in conns.items():
        start = time.perf_counter()
        conn.request("GET", "/sitemap-1.xml.gz", headers={"Accept-Encoding": "gzip"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, (port, response.status)
        took[port].append(time.perf_counter() - start)
def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000
for port, name in ((18080, "primary"), (18082, "standby")):
    print(f"cold page of 50,000 URLs, reads on the {name}: p50 {pct(took[port], 0.5):.0f} ms, "
          f"p99 {pct(took[port], 0.99):.0f} ms ({fetches} fetches)")
print(f"standby / primary, p50: {pct(took[18082], 0.5) / pct(took[18080], 0.5):.2f}x")
PY
