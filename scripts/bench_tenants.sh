#!/usr/bin/env bash
# A platform's tenants: SITES sites of URLS URLs each, written with plain
# SQL and placed, then the service at its defaults, measured as a platform
# meets it:
#   - time from `serve` to /readyz 200, and RSS at idle;
#   - wrk fetching the indexes of 10,000 random sites (RSS after), then the
#     same sites warm (p50/p99, wrk --latency), and 1,000 sites never asked
#     before, one at a time (cold p50/p99);
#   - 10,000 sites created through the API by 16 clients (sites/s), and for
#     50 more the time from the PUT's answer on one replica to the site's
#     first 200 on another;
#   - one fold of one changed row (`sitemapd fold`), 20 times, here and in
#     a database of one site, side by side;
#   - one tenant writing 100 changes/s, alone and beside a crawler
#     revalidating 10,000 others: the database reads serving makes
#     (bench_tenant_isolation.py);
#   - another site's single-row inserts, from commit to its page, with no
#     load and right after a 10M-row COPY into one site commits
#     (bench_fairness.py).
#
#   scripts/bench_tenants.sh [--sites N] [--urls N] [--load-rows N] BINARY
#
# Needs psql, curl, python3 with psycopg (pip install "psycopg[binary]") and
# wrk (apt-get install wrk), and PostgreSQL on 127.0.0.1:5432 (trust auth).
# Listens on 127.0.0.1:18080-18091 only.
# Creates and drops sitemapd_bench_tenants and sitemapd_bench_one_site.
set -euo pipefail

sites=100000
urls=100
load_rows=10000000
while (($#)); do
    case "$1" in
        --sites) sites=$2; shift 2 ;;
        --urls) urls=$2; shift 2 ;;
        --load-rows) load_rows=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: $0 [--sites N] [--urls N] [--load-rows N] BINARY" >&2; exit 2; }
binary=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

pg=postgres://postgres@127.0.0.1:5432
db=sitemapd_bench_tenants
one=sitemapd_bench_one_site
token=smd_bench-tenants-token
export RUST_LOG=warn SITEMAPD_BASE_URL=https://www.example.com/
export SITEMAPD_API_TOKEN_HASHES="[\"sha256:$(printf %s "$token" | sha256sum | cut -d' ' -f1)\"]"

seconds_since() { echo "$(date +%s.%N) - $1" | bc; }
rss_mib() { echo "$(($(awk '/VmRSS/ {print $2}' "/proc/$1/status") / 1024))"; }

# Starts a replica on PORT (metrics on PORT+1) over DATABASE.
serve() {
    local port=$1 database=$2
    DATABASE_URL=$pg/$database SITEMAPD_LISTEN=127.0.0.1:$port \
        SITEMAPD_METRICS_LISTEN=127.0.0.1:$((port + 1)) \
        "$binary" serve >"$work/serve-$port.log" 2>&1 &
    pids+=($!)
}

until_ready() {
    local port=$1 started=$2
    until curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"; do
        (($(echo "$(seconds_since "$started") < 600" | bc))) || { echo "not ready" >&2; exit 1; }
        sleep 0.01
    done
}

echo "== $sites sites of $urls URLs"
for database in $db $one; do
    psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database"
    DATABASE_URL=$pg/$database "$binary" migrate >/dev/null
done
started=$(date +%s.%N)
psql -q "$pg/$db" <<SQL
INSERT INTO sitemap_sites (site, origin, path_prefix)
SELECT 't' || s, 'https://t' || s || '.example.com', '/' FROM generate_series(1, $sites) s;
INSERT INTO sitemap_urls (site, loc)
SELECT 't' || s, 'https://t' || s || '.example.com/p/' || u
FROM generate_series(1, $sites) s, generate_series(1, $urls) u;
SQL
psql -q "$pg/$one" <<SQL
INSERT INTO sitemap_sites (site, origin, path_prefix) VALUES ('t1', 'https://t1.example.com', '/');
INSERT INTO sitemap_urls (site, loc)
SELECT 't1', 'https://t1.example.com/p/' || u FROM generate_series(1, $urls) u;
SQL
printf 'written in %.1f s\n' "$(seconds_since "$started")"
for database in $db $one; do
    started=$(date +%s.%N)
    DATABASE_URL=$pg/$database "$binary" fold >/dev/null
    printf 'placed %s in %.1f s\n' "$database" "$(seconds_since "$started")"
done
psql -q "$pg/$db" -c "VACUUM ANALYZE"

echo "== start and memory"
started=$(date +%s.%N)
serve 18080 $db
a=${pids[-1]}
until_ready 18080 "$started"
printf '/readyz 200 after %.3f s\n' "$(seconds_since "$started")"
sleep 2
echo "RSS at idle: $(rss_mib "$a") MiB"

# 10,000 random sites asked for, 1,000 others never asked.
python3 - "$sites" "$work" <<'PY'
import random, sys
sites, work = int(sys.argv[1]), sys.argv[2]
rng = random.Random(20261126)
asked = min(10_000, sites * 9 // 10)
never = min(1_000, sites - asked)
chosen = rng.sample(range(1, sites + 1), asked + never)
with open(f"{work}/asked.txt", "w") as f:
    f.writelines(f"t{n}.example.com\n" for n in chosen[:asked])
with open(f"{work}/never.txt", "w") as f:
    f.writelines(f"t{n}.example.com\n" for n in chosen[asked:])
PY
cat >"$work/hosts.lua" <<LUA
local hosts = {}
for line in io.lines("$work/asked.txt") do hosts[#hosts + 1] = line end
local i = 0
request = function()
    i = i % #hosts + 1
    return wrk.format("GET", "/sitemap_index.xml", { Host = hosts[i] })
end
LUA
wrk -t2 -c16 -d20s -s "$work/hosts.lua" http://127.0.0.1:18080/ | grep -E "Requests/sec|Non-2xx" || true
echo "RSS after 10,000 sites' indexes: $(rss_mib "$a") MiB"
echo "-- the same indexes, warm"
wrk -t2 -c16 -d20s --latency -s "$work/hosts.lua" http://127.0.0.1:18080/ |
    grep -E "Requests/sec|Non-2xx|^ +(50|99)%" || true
echo "RSS after: $(rss_mib "$a") MiB"

python3 - "$work/never.txt" <<'PY'
import http.client, statistics, sys, time
hosts = [line.strip() for line in open(sys.argv[1])]
conn = http.client.HTTPConnection("127.0.0.1", 18080)
took = []
for host in hosts:
    start = time.perf_counter()
    conn.request("GET", "/sitemap_index.xml", headers={"Host": host})
    response = conn.getresponse()
    response.read()
    took.append(time.perf_counter() - start)
    assert response.status == 200, (host, response.status)
took.sort()
print(f"cold index, {len(took)} sites never asked: p50 {took[len(took) // 2] * 1000:.2f} ms, "
      f"p99 {took[int(len(took) * 0.99)] * 1000:.2f} ms, max {took[-1] * 1000:.2f} ms")
PY

echo "== sites through the API"
started=$(date +%s.%N)
serve 18090 $db
until_ready 18090 "$started"
python3 - "$token" <<'PY'
import http.client, json, statistics, sys, threading, time
token = sys.argv[1]
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

def put(conn, name):
    body = json.dumps({"base_url": f"https://{name}.example.net/"})
    conn.request("PUT", f"/api/v1/sites/{name}", body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    assert response.status == 201, (name, response.status)

count, clients = 10_000, 16
def worker(k):
    conn = http.client.HTTPConnection("127.0.0.1", 18080)
    for i in range(k, count, clients):
        put(conn, f"n{i}")
threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
start = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
took = time.perf_counter() - start
print(f"created {count} sites in {took:.2f} s: {count / took:,.0f} sites/s")

a = http.client.HTTPConnection("127.0.0.1", 18080)
b = http.client.HTTPConnection("127.0.0.1", 18090)
delays = []
for i in range(50):
    name = f"r{i}"
    put(a, name)
    answered = time.perf_counter()
    while True:
        b.request("GET", "/robots.txt", headers={"Host": f"{name}.example.net"})
        response = b.getresponse()
        response.read()
        if response.status == 200:
            break
    delays.append(time.perf_counter() - answered)
delays.sort()
print(f"create on one replica -> first 200 on the other, 50 sites: median "
      f"{statistics.median(delays) * 1000:.1f} ms, max {delays[-1] * 1000:.1f} ms")
PY
for pid in "${pids[@]}"; do kill -TERM "$pid"; wait "$pid" || true; done
pids=()

echo "== one fold of one changed row, 20 times each, alternating"
for database in $db $one; do
    : >"$work/fold-$database.txt"
done
for run in $(seq 1 20); do
    for database in $db $one; do
        psql -q "$pg/$database" -c "UPDATE sitemap_urls SET lastmod = now() WHERE site = 't1' AND loc = 'https://t1.example.com/p/1'"
        DATABASE_URL=$pg/$database "$binary" fold |
            sed -n 's/^folded 1 rows in \([0-9.]*\) s$/\1/p' >>"$work/fold-$database.txt"
    done
done
python3 - "$work/fold-$db.txt" "$work/fold-$one.txt" <<'PY'
import statistics, sys
many, one = ([float(x) for x in open(p)] for p in sys.argv[1:])
m, o = statistics.median(many), statistics.median(one)
print(f"fold of one change: {m * 1000:.1f} ms median with every site, "
      f"{o * 1000:.1f} ms with one site: {m / o:.2f}x")
PY

echo "== one busy tenant beside a crawler of 10,000 others"
python3 "$here/bench_tenant_isolation.py" --database-url "$pg/$db" --binary "$binary" \
    --sites "$((sites - 1 < 10000 ? sites - 1 : 10000))"

echo "== another site's inserts, with no load and right after a COPY of $load_rows rows"
python3 "$here/bench_fairness.py" --database-url "$pg/$db" --binary "$binary" --rows "$load_rows"

for database in $db $one; do
    psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $database"
done
