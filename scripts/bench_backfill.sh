#!/usr/bin/env bash
# A plain-SQL backfill of N rows with the service running, as an
# application would do one: COPY into sitemap_urls in chunks, each chunk
# committed, one after the other, while `sitemapd serve` folds what is
# committed. Prints each chunk's COPY time and when placement caught up
# with it (every row so far on a page), then the whole load's figures, the
# size on disk, and scripts/bench_scale.py on the result (index, cold and
# cached pages, peak RSS). `serve`'s RSS is sampled every 0.5 s with what its
# page cache holds (the warm-up fills it with the pages folds changed): the
# load's peak is printed both whole and less the page cache, the share of
# memory `page_cache_bytes` is set to hold.
#
#   scripts/bench_backfill.sh [--rows N] [--chunk N] [--crawl-pages N] [--keep] BINARY OUT.json
#
# --crawl-pages bounds bench_scale.py's cold crawl to the first N pages (a
# crawl of all 2,001 pages of 100M rows would take a quarter of an hour).
#
# Needs psql, curl, python3 with psycopg, wrk and nginx (for bench_scale.py), and
# PostgreSQL at $PG_BASE (default postgres://postgres@127.0.0.1:5432);
# creates sitemapd_bench_backfill and drops it at the end unless --keep.
# Check `df` first: BENCHMARKS.md says what 100M rows need.
set -euo pipefail
cd "$(dirname "$0")/.."

rows=100000000
chunk=10000000
keep=false
crawl=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --chunk) chunk=$2; shift 2 ;;
        --crawl-pages) crawl=(--crawl-pages "$2"); shift 2 ;;
        --keep) keep=true; shift ;;
        *) break ;;
    esac
done
[[ $# -eq 2 ]] || { echo "usage: $0 [--rows N] [--chunk N] [--crawl-pages N] [--keep] BINARY OUT.json" >&2; exit 2; }
binary=$1
out=$2
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_backfill
url="$pg_base/$db"
base_url=http://127.0.0.1:8080/
port=18480
metrics_port=18481
work=$(mktemp -d)
server=
watcher=
sampler=
cleanup() {
    [[ -n $sampler ]] && kill "$sampler" 2>/dev/null
    [[ -n $watcher ]] && kill "$watcher" 2>/dev/null
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
    $keep || psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" || true
}
trap cleanup EXIT

now() { date +%s.%N; }
placed() { psql -qAt "$url" -c "SELECT coalesce(sum(url_count), 0) FROM sitemap_pages"; }

psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
DATABASE_URL=$url SITEMAPD_BASE_URL=$base_url "$binary" migrate >/dev/null
DATABASE_URL=$url SITEMAPD_BASE_URL=$base_url SITEMAPD_LISTEN=127.0.0.1:$port \
    SITEMAPD_METRICS_LISTEN=127.0.0.1:$metrics_port "$binary" serve >"$work/serve.log" 2>&1 &
server=$!

# serve's RSS every 0.5 s, with its page cache's bytes as last read:
# "seconds rss cache" (KiB, bytes). The cache is read from /metrics when
# RSS passes its highest so far by 1 MiB, and every 30 s, not at every
# sample: a scrape also runs the per-site counts in the database, which at
# this size would weigh on the load measured. The cache grows as the
# warm-up fills it, so the value last read is at most what it holds, and
# the RSS less the cache at most overstated.
sample_memory() {
    local rss cache=0 highest=0 read_at=0
    while rss=$(awk '/VmRSS/ {print $2}' "/proc/$server/status" 2>/dev/null); do
        if ((rss > highest + 1024 || SECONDS - read_at >= 30)); then
            cache=$(curl -sf "http://127.0.0.1:$metrics_port/metrics" |
                awk '$1 == "sitemapd_page_cache_bytes" {print $2}')
            cache=${cache:-0}
            read_at=$SECONDS
            ((rss > highest)) && highest=$rss
        fi
        echo "$(now) $rss $cache"
        sleep 0.5
    done
}
sample_memory >"$work/memory" &
sampler=$!
df -h "$(psql -qAt "$pg_base/postgres" -c 'SHOW data_directory')" | tail -1
# The server settings a load's speed depends on, printed with its figures.
psql -qAt "$pg_base/postgres" -c "SELECT string_agg(name || ' = ' || current_setting(name), ', ' ORDER BY name)
    FROM pg_settings WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_compression')"

# Placement's progress: when the rows placed first reached each chunk's end.
watch_placement() {
    local boundary
    for boundary in "$@"; do
        until (($(placed) >= boundary)); do sleep 0.5; done
        echo "$boundary $(now)"
    done
}
# Every million rows, as folds commit batches of fold_batch_rows (default
# 1M); chunk ends among them.
step=$((chunk < 1000000 ? chunk : 1000000))
boundaries=$( (seq "$step" "$step" "$rows"; seq "$chunk" "$chunk" "$rows"; echo "$rows") | sort -nu)
# shellcheck disable=SC2086
watch_placement $boundaries >"$work/placed" &
watcher=$!

generate() {
    # section, loc, lastmod: shop-like URLs of three sections.
    psql -qAt "$pg_base/postgres" -c "COPY (
        SELECT (ARRAY['blog','products','news'])[1 + g % 3],
               '$base_url' || (ARRAY['blog','products','news'])[1 + g % 3] || '/'
                   || substr(md5(g::text), 1, 10) || '-item-' || g,
               timestamptz '2026-01-01' + make_interval(secs => g % 31536000)
        FROM generate_series($1, $2) g) TO STDOUT" >"$3"
}

loaded=0
copy_total=0
first_copy=
while ((loaded < rows)); do
    first=$((loaded + 1))
    last=$((loaded + chunk < rows ? loaded + chunk : rows))
    generate "$first" "$last" "$work/chunk.tsv"
    start=$(now)
    first_copy=${first_copy:-$start}
    psql -q "$url" -c "\\copy sitemap_urls (section, loc, lastmod) FROM '$work/chunk.tsv'"
    committed=$(now)
    copy_s=$(echo "$committed - $start" | bc)
    copy_total=$(echo "$copy_total + $copy_s" | bc)
    echo "$last $committed" >>"$work/committed"
    printf 'rows %s-%s: COPY %.1f s (%.0f rows/s)\n' "$first" "$last" "$copy_s" \
        "$(echo "($last - $first + 1) / $copy_s" | bc -l)"
    rm -f "$work/chunk.tsv"
    loaded=$last
done
wait "$watcher"
watcher=
awk 'NR == FNR { committed[$1] = $2; next }
     FNR == 1 { start = '"$first_copy"' }
     $1 in committed { printf "rows up to %s: placed %.1f s after their COPY committed\n", $1, $2 - committed[$1]; next }
     { printf "rows up to %s placed %.1f s after the first COPY began\n", $1, $2 - start }' \
    "$work/committed" "$work/placed"
all_placed=$(tail -1 "$work/placed" | cut -d' ' -f2)
# A scrape of /metrics once the load is placed, timed, with the corrected
# lastmods it reports against a count of the clamps.
scrape_start=$(now)
curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics"
printf '/metrics after the load: %.0f ms; %s; clamps in the database: %s\n' \
    "$(echo "($(now) - $scrape_start) * 1000" | bc)" \
    "$(grep '^sitemapd_lastmods_in_future' "$work/metrics" | tr '\n' ' ' || echo 'no lastmods_in_future')" \
    "$(psql -qAt "$url" -c 'SELECT count(*) FROM sitemap_lastmod_clamps')"
server_rss=$(awk '/VmHWM/ {print $2 / 1024 " MiB"}' "/proc/$server/status")
kill "$sampler" 2>/dev/null || true
sampler=
kill "$server" && wait "$server" 2>/dev/null || true
server=
printf 'load: %s rows, COPY %.0f s in all; first COPY to the last row placed %.0f s (%.0f rows/s); serve peak RSS %s\n' \
    "$rows" "$copy_total" "$(echo "$all_placed - $first_copy" | bc)" \
    "$(echo "$rows / ($all_placed - $first_copy)" | bc -l)" "$server_rss"
awk -v start="$first_copy" '
    { rss = $2 / 1024; rest = rss - $3 / 1048576 }
    rss > peak { peak = rss; peak_at = $1 - start; peak_cache = $3 / 1048576 }
    rest > peak_rest { peak_rest = rest; rest_at = $1 - start }
    END { printf "serve RSS sampled every 0.5 s: peak %.1f MiB at %.0f s (the page cache %.1f MiB of it); less the page cache, peak %.1f MiB at %.0f s\n",
                 peak, peak_at, peak_cache, peak_rest, rest_at }' "$work/memory"

psql -q "$url" -c "ANALYZE"
psql -qAt "$url" -c "SELECT 'database ' || pg_size_pretty(pg_database_size(current_database()))" \
    -c "SELECT relname || ' ' || pg_size_pretty(pg_total_relation_size(oid)) FROM pg_class
        WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
        ORDER BY pg_total_relation_size(oid) DESC LIMIT 4"

label=$(python3 -c "print(f'{$rows / 1e6:g}M')")
scripts/bench_scale.py --database-url "$url" --label "$label" --binary "$binary" \
    --base-url "$base_url" --out "$out" "${crawl[@]}"
