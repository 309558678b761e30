#!/usr/bin/env bash
# Placement end to end, as deployed: `sitemapd serve` at its defaults on a
# fresh database, then a plain-SQL COPY of ROWS new rows (three sections,
# as bulk_rows.sql writes them); timed from the COPY's commit until the
# page summaries count every row, polled every 0.1 s. Prints each run's
# time, rows/s and the server's peak RSS (VmHWM), then the medians; the
# builds given alternate within each run.
#
#   scripts/bench_placement.sh [--rows N] [--runs N] BINARY...
#
# Needs psql and curl, and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); listens on 127.0.0.1:18780-18781;
# creates and drops sitemapd_bench_placement.
set -euo pipefail

rows=1000000
runs=3
while (($#)); do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# >= 1)) || { echo "usage: $0 [--rows N] [--runs N] BINARY..." >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_placement
work=$(mktemp -d)
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
}
trap cleanup EXIT
export DATABASE_URL=$pg_base/$db SITEMAPD_BASE_URL=http://localhost:8080/ \
    SITEMAPD_LISTEN=127.0.0.1:18780 SITEMAPD_METRICS_LISTEN=127.0.0.1:18781
unset RUST_LOG

psql -qAt "$pg_base/postgres" -v rows="$rows" -f "$here/scripts/bulk_rows.sql" >"$work/rows.tsv"
now() { date +%s.%N; }
placed() { psql -qAt "$DATABASE_URL" -c "SELECT coalesce(sum(url_count), 0) FROM sitemap_pages"; }

for ((run = 1; run <= runs; run++)); do
    for binary in "$@"; do
        psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
        "$binary" migrate >/dev/null 2>&1
        "$binary" serve >"$work/serve.log" 2>&1 &
        server=$!
        until curl -sf -o /dev/null http://127.0.0.1:18780/healthz; do sleep 0.05; done
        psql -q "$DATABASE_URL" -c "\\copy sitemap_urls (section, loc, lastmod) FROM '$work/rows.tsv'"
        committed=$(now)
        until (($(placed) >= rows)); do sleep 0.1; done
        seconds=$(echo "$(now) - $committed" | bc)
        peak=$(awk '/VmHWM/ {print $2}' "/proc/$server/status")
        kill "$server" && wait "$server" 2>/dev/null || true
        server=
        echo "$binary $seconds $peak" | tee -a "$work/runs"
    done
done
python3 - "$work/runs" "$rows" <<'PY'
import statistics, sys
rows = int(sys.argv[2])
by = {}
for line in open(sys.argv[1]):
    binary, seconds, peak = line.split()
    by.setdefault(binary, []).append((float(seconds), int(peak)))
print(f"| {rows:,} new rows | placed after the commit (median) | rows/s | peak RSS (max) | runs |")
print("|---|---|---|---|---|")
for binary, results in by.items():
    median = statistics.median(s for s, _ in results)
    peak = max(p for _, p in results) / 1024
    each = ", ".join(f"{s:.1f}" for s, _ in results)
    print(f"| {binary} | {median:.1f} s | {rows / median:,.0f} | {peak:.0f} MiB | {each} s |")
PY
