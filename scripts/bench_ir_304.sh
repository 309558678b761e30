#!/usr/bin/env bash
# Instructions per `304` of several builds, counted by valgrind's callgrind:
# the same count for the same build and requests however busy the machine
# is, where CPU time per request (scripts/bench_cpu_304.sh) spreads by
# ±20% on a shared machine. Each build runs `serve` under callgrind over
# one database of ROWS plain-SQL rows (placed by `sitemapd fold`), with its
# background rounds (folds, warm-up, skip reports, summary reloads) slowed
# to once in ten minutes so that only requests are counted; after a warm-up
# of 400, REQUESTS conditional GETs of the first page (four keep-alive
# connections, Googlebot's User-Agent, its ETag in If-None-Match, every
# answer checked to be a `304`) are counted between callgrind's zero and
# dump. Prints each build's instructions per `304` (user space only; the
# kernel's part is not counted).
#
# A `rep movsb` copy counts one instruction per byte, so a change that
# copies more is counted heavier than it runs; the per-function split
# (callgrind_annotate on the dumps kept with --keep DIR) shows where.
#
#   scripts/bench_ir_304.sh [--rows N] [--requests N] [--keep DIR] BINARY...
#
# Needs psql, curl, python3 and valgrind (apt-get install valgrind), and
# PostgreSQL on 127.0.0.1:5432. Listens on 127.0.0.1:18840-18859 only;
# creates and drops sitemapd_bench_ir_304.
set -euo pipefail

rows=200000
requests=4000
keep=
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --keep) keep=$(realpath "$2"); shift 2 ;;
        *) break ;;
    esac
done
[[ $# -ge 1 && $# -le 10 ]] || {
    echo "usage: $0 [--rows N] [--requests N] [--keep DIR] BINARY... (1 to 10)" >&2
    exit 2
}
binaries=("$@")
here=$(cd "$(dirname "$0")/.." && pwd)
pg=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_ir_304
work=$(mktemp -d)
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

export SITEMAPD_BASE_URL=http://localhost:8080/ DATABASE_URL=$pg/$db
PG_BASE=$pg "$here/scripts/seed_placed.sh" "${binaries[0]}" "$db" "$rows"

# Sends N conditional GETs over four keep-alive connections; fails on any
# answer but a `304`.
cat >"$work/client.py" <<'PY'
import http.client, sys, threading
total, port, path, etag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
headers = {
    "Host": "localhost:8080",
    "If-None-Match": etag,
    "User-Agent": "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
}
failed = []
def run(count):
    connection = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(count):
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        if response.status != 304:
            failed.append(response.status)
            return
threads = [threading.Thread(target=run, args=(total // 4,)) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
sys.exit(f"answers other than 304: {failed}" if failed else 0)
PY

export SITEMAPD_FOLD_INTERVAL_MS=600000 SITEMAPD_WARM_UP_INTERVAL_MS=600000 \
    SITEMAPD_SKIP_REPORT_INTERVAL_MS=600000 SITEMAPD_SUMMARY_MAX_AGE_MS=600000
host='Host: localhost:8080'
port=18840
for binary in "${binaries[@]}"; do
    SITEMAPD_LISTEN=127.0.0.1:$port SITEMAPD_METRICS_LISTEN=127.0.0.1:$((port + 1)) \
        valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.$port.%p" \
        "$binary" serve >"$work/serve-$port.log" 2>&1 &
    server=$!
    for _ in $(seq 1 600); do
        curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break
        sleep 0.5
    done
    page=$(curl -sf -H "$host" "http://127.0.0.1:$port/sitemap_index.xml" |
        grep -o 'sitemap-[^<]*\.xml\.gz' | head -1)
    etag=$(curl -sfI -H "$host" "http://127.0.0.1:$port/$page" |
        awk 'tolower($1) == "etag:" { print $2 }' | tr -d '\r')
    [[ -n $page && -n $etag ]] || { echo "$binary: no page to ask for" >&2; exit 1; }
    python3 "$work/client.py" 400 "$port" "/$page" "$etag"
    callgrind_control --zero "$server" >/dev/null 2>&1
    python3 "$work/client.py" "$requests" "$port" "/$page" "$etag"
    callgrind_control --dump "$server" >/dev/null 2>&1
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    # The dump asked for is part 1; the one written at exit is not counted.
    dump=$(ls "$work"/callgrind."$port".*.1)
    counted=$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")
    echo "$binary: $((counted / requests)) instructions per 304 ($requests requests, $page)"
    [[ -n $keep ]] && mkdir -p "$keep" && cp "$dump" "$keep/$(basename "$binary").$port.callgrind"
    port=$((port + 2))
done
