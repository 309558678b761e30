#!/usr/bin/env bash
# What the crawler ledger costs, and that it stays bounded:
#   - cost: two replicas over one database of 100,000 URLs, one with the
#     ledger on (crawler_ledger, ranges from tests/fixtures/crawler-ranges,
#     every request a verified Googlebot's through a trusted proxy) and one
#     with it off; wrk on a cached page and on 304s, 16 and 64 connections,
#     ROUNDS alternating rounds; the ratio on/off of the median requests/s;
#   - bounded: 100,000 requests to the ledger's replica, each with a user
#     agent and a forwarded address of its own (half of them claiming to be
#     Googlebot, so unverified), its RSS before and after, and the ledger's
#     row count before and after.
#
#   scripts/bench_ledger.sh [--rounds N] [--seconds N] BINARY
#
# Needs psql, curl, python3 and wrk (apt-get install wrk), and PostgreSQL on
# 127.0.0.1:5432. Listens on 127.0.0.1:18740-18743 only; creates and drops
# sitemapd_bench_ledger.
set -euo pipefail

rounds=3
seconds=10
while (($#)); do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: $0 [--rounds N] [--seconds N] BINARY" >&2; exit 2; }
binary=$(realpath "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

pg=postgres://postgres@127.0.0.1:5432
db=sitemapd_bench_ledger
export RUST_LOG=warn SITEMAPD_BASE_URL=https://www.example.com/ DATABASE_URL=$pg/$db
googlebot="Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $db"
"$binary" migrate >/dev/null
psql -q "$pg/$db" -c "INSERT INTO sitemap_urls (loc, lastmod)
    SELECT 'https://www.example.com/p/' || n, now() FROM generate_series(1, 100000) n"
"$binary" fold >/dev/null

# PORT, then the ledger setting.
serve() {
    SITEMAPD_LISTEN=127.0.0.1:$1 SITEMAPD_METRICS_LISTEN=127.0.0.1:$(($1 + 1)) \
        SITEMAPD_CRAWLER_LEDGER=$2 SITEMAPD_CRAWLER_RANGES_DIR="$here/tests/fixtures/crawler-ranges" \
        SITEMAPD_TRUSTED_PROXIES='["127.0.0.1"]' \
        "$binary" serve >"$work/serve-$1.log" 2>&1 &
    pids+=($!)
    until curl -sf -o /dev/null "http://127.0.0.1:$1/readyz"; do sleep 0.05; done
}
serve 18740 true
on=${pids[-1]}
serve 18742 false

page=/sitemap-1.xml.gz
etag=$(curl -sf -D - -o /dev/null -H 'Host: www.example.com' "http://127.0.0.1:18740$page" |
    awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r')
# warm both caches
for port in 18740 18742; do curl -sf -o /dev/null -H 'Host: www.example.com' "http://127.0.0.1:$port$page"; done

rps() {
    wrk -t2 -c"$1" -d"${seconds}s" -H 'Host: www.example.com' -H "User-Agent: $googlebot" \
        -H 'X-Forwarded-For: 127.0.0.2' "${@:3}" "http://127.0.0.1:$2$page" |
        awk '/Requests\/sec/ {print $2}'
}
for kind in cached 304; do
    for connections in 16 64; do
        extra=()
        [[ $kind == 304 ]] && extra=(-H "If-None-Match: $etag")
        for ((round = 1; round <= rounds; round++)); do
            echo "$kind c$connections on $(rps "$connections" 18740 "${extra[@]}")" >>"$work/rps"
            echo "$kind c$connections off $(rps "$connections" 18742 "${extra[@]}")" >>"$work/rps"
        done
    done
done
python3 - "$work/rps" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kind, connections, ledger, rps = line.split()
    runs.setdefault((kind, connections), {}).setdefault(ledger, []).append(float(rps))
print("| | ledger on, median req/s | ledger off | on/off | rounds (on/off) |")
print("|---|---|---|---|---|")
for (kind, connections), by in runs.items():
    on, off = statistics.median(by["on"]), statistics.median(by["off"])
    pairs = ", ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(by["on"], by["off"]))
    print(f"| {kind} page, {connections} | {on:,.0f} | {off:,.0f} | **{on / off:.3f}×** | {pairs} |")
PY

echo "== 100,000 requests, each its own user agent and address"
# One of each kind first: the rows they make are there before counting.
for agent in "$googlebot" "curl/8"; do
    curl -sf -o /dev/null -H 'Host: www.example.com' -H "User-Agent: $agent" \
        -H 'X-Forwarded-For: 10.0.0.1' "http://127.0.0.1:18740$page"
done
sleep 2
rows_before=$(psql -qAt "$pg/$db" -c "SELECT count(*) FROM sitemap_crawler_ledger")
rss_before=$(rss_kib "$on")
python3 - <<'PY'
import http.client, random
rng = random.Random(20261126)
conn = http.client.HTTPConnection("127.0.0.1", 18740)
for n in range(100_000):
    address = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    agent = (f"Mozilla/5.0 (compatible; Googlebot/{n}.{rng.randrange(10**6)})" if n % 2
             else f"client-{n}-{rng.randrange(10**9)}/1.0")
    conn.request("GET", "/sitemap-1.xml.gz",
                 headers={"Host": "www.example.com", "User-Agent": agent, "X-Forwarded-For": address})
    response = conn.getresponse()
    response.read()
    assert response.status == 200, response.status
PY
sleep 2
rows_after=$(psql -qAt "$pg/$db" -c "SELECT count(*) FROM sitemap_crawler_ledger")
rss_after=$(rss_kib "$on")
dropped=$(curl -sf http://127.0.0.1:18741/metrics | awk '/^sitemapd_crawler_fetches_dropped_total/ {print $2}')
echo "RSS: $((rss_before / 1024)) MiB before, $((rss_after / 1024)) MiB after ($(((rss_after - rss_before) / 1024)) MiB)"
echo "ledger rows: $rows_before before, $rows_after after; fetches dropped: $dropped"
psql -qAt "$pg/$db" -c "SELECT crawler, fetches FROM sitemap_crawler_ledger ORDER BY crawler"
