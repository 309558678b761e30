#!/usr/bin/env bash
# A plain-SQL backfill of N rows with the service running, as an
# application would do one: COPY into sitemap_urls in chunks, each chunk
# committed, while `sitemapd serve` folds. Per chunk it prints how long the
# COPY took and how long placement then took to catch up (every row of the
# chunk on a page), so the rates show how both move as the table grows.
# Then the size on disk, and scripts/bench_scale.py on the result (index,
# cold and cached pages, peak RSS).
#
#   scripts/bench_backfill.sh [--rows N] [--chunk N] [--keep] BINARY OUT.json
#
# Needs psql, python3 with psycopg, wrk and nginx (for bench_scale.py), and
# PostgreSQL at $PG_BASE (default postgres://postgres@127.0.0.1:5432);
# creates sitemapd_bench_backfill and drops it at the end unless --keep.
# Check `df` first: 100M rows take about 60 GB (BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

rows=100000000
chunk=10000000
keep=false
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --chunk) chunk=$2; shift 2 ;;
        --keep) keep=true; shift ;;
        *) break ;;
    esac
done
[[ $# -eq 2 ]] || { echo "usage: $0 [--rows N] [--chunk N] [--keep] BINARY OUT.json" >&2; exit 2; }
binary=$1
out=$2
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_backfill
url="$pg_base/$db"
base_url=http://127.0.0.1:8080/
port=18480
work=$(mktemp -d)
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
    $keep || psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" || true
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc; }
placed() { psql -qAt "$url" -c "SELECT coalesce(sum(url_count), 0) FROM sitemap_pages"; }

psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
DATABASE_URL=$url SITEMAPD_BASE_URL=$base_url "$binary" migrate >/dev/null
DATABASE_URL=$url SITEMAPD_BASE_URL=$base_url SITEMAPD_LISTEN=127.0.0.1:$port \
    "$binary" serve >"$work/serve.log" 2>&1 &
server=$!
df -h "$(psql -qAt "$pg_base/postgres" -c 'SHOW data_directory')" | tail -1

loaded=0
copy_total=0
place_total=0
while ((loaded < rows)); do
    first=$((loaded + 1))
    last=$((loaded + chunk < rows ? loaded + chunk : rows))
    # section, loc, lastmod: shop-like URLs of three sections.
    psql -qAt "$pg_base/postgres" -c "COPY (
        SELECT (ARRAY['blog','products','news'])[1 + g % 3],
               '$base_url' || (ARRAY['blog','products','news'])[1 + g % 3] || '/'
                   || substr(md5(g::text), 1, 10) || '-item-' || g,
               timestamptz '2026-01-01' + make_interval(secs => g % 31536000)
        FROM generate_series($first, $last) g) TO STDOUT" >"$work/chunk.tsv"
    start=$(now)
    psql -q "$url" -c "\\copy sitemap_urls (section, loc, lastmod) FROM '$work/chunk.tsv'"
    copy_s=$(elapsed "$start")
    start=$(now)
    until (($(placed) >= last)); do sleep 0.5; done
    place_s=$(elapsed "$start")
    rm -f "$work/chunk.tsv"
    loaded=$last
    copy_total=$(echo "$copy_total + $copy_s" | bc)
    place_total=$(echo "$place_total + $place_s" | bc)
    printf 'rows %s-%s: COPY %.1f s (%.0f rows/s), placed %.1f s later (%.0f rows/s)\n' \
        "$first" "$last" "$copy_s" "$(echo "($last - $first + 1) / $copy_s" | bc -l)" \
        "$place_s" "$(echo "($last - $first + 1) / $place_s" | bc -l)"
done
server_rss=$(awk '/VmHWM/ {print $2 / 1024 " MiB"}' "/proc/$server/status")
kill "$server" && wait "$server" 2>/dev/null || true
server=
printf 'load: COPY %.0f s in all, placement %.0f s in all; serve peak RSS during the load %s\n' \
    "$copy_total" "$place_total" "$server_rss"

psql -q "$url" -c "VACUUM ANALYZE"
psql -qAt "$url" -c "SELECT 'database ' || pg_size_pretty(pg_database_size(current_database()))" \
    -c "SELECT relname || ' ' || pg_size_pretty(pg_total_relation_size(oid)) FROM pg_class
        WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
        ORDER BY pg_total_relation_size(oid) DESC LIMIT 4"

label=$(python3 -c "print(f'{$rows / 1e6:g}M')")
scripts/bench_scale.py --database-url "$url" --label "$label" --binary "$binary" \
    --base-url "$base_url" --out "$out"
