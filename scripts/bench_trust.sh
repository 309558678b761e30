#!/usr/bin/env bash
# What the trust checks cost: the same 1M new rows (three sections, as
# bench_bulk.sh writes them) folded and served three ways, alternating,
# each run on a fresh copy of the database:
#   plain:   no robots text, no window;
#   robots:  a robots.txt of 50 rules in two groups (`*`, and Googlebot's
#            own), which leave some 0.4% of the rows out;
#   windows: 10% of the rows written with a window open now (visible_from a day
#            ago, visible_until in 30 days), so the same rows are listed.
# Each run times one fold of every row by the `fold` command, in one batch
# (as the service sizes its largest), then starts `sitemapd serve` with no
# page cache and times three crawls of the index's pages (.xml.gz) with
# curl, every page built from the database each time.
#
#   scripts/bench_trust.sh [--rows N] [--runs N] BINARY
#
# Needs psql, curl and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops sitemapd_trust,
# sitemapd_trust_windows and sitemapd_trust_run; serves on 127.0.0.1:18731.
set -euo pipefail

rows=1000000
runs=5
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -eq 1 ]] || { echo "usage: $0 [--rows N] [--runs N] BINARY" >&2; exit 2; }
binary=$1
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
listen=127.0.0.1:18731
work=$(mktemp -d)
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

psql -qAt "$pg_base/postgres" -v rows="$rows" -f "$(dirname "$0")/bulk_rows.sql" > "$work/rows.tsv"
{
    echo "User-agent: *"
    for area in account admin api cart checkout compare login logout orders password \
                register returns reviews/new search session share tmp track wishlist; do
        echo "Disallow: /$area/"
        echo "Disallow: /products/$area"
    done
    echo "Disallow: /*?sessionid="
    echo "Disallow: /*?sort="
    echo "Disallow: /*.pdf\$"
    echo "Disallow: /blog/*-item-99"
    echo "Allow: /account/help/"
    echo
    echo "User-agent: Googlebot"
    echo "Disallow: /cart/"
    echo "Disallow: /checkout/"
    echo "Disallow: /*?sessionid="
    echo "Disallow: /news/*-item-77"
    echo "Disallow: /*/print\$"
    echo "Disallow: /*?preview="
    echo "Allow: /news/*-item-770"
} > "$work/robots.txt"
echo "robots.txt: $(grep -ci '^\(dis\)\?allow:' "$work/robots.txt") rules"

psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_trust"
DATABASE_URL="$pg_base/sitemapd_trust" SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" migrate >/dev/null
psql -q "$pg_base/sitemapd_trust" -c "\\copy sitemap_urls (section, loc, lastmod) FROM '$work/rows.tsv'" \
    -c "VACUUM ANALYZE sitemap_urls" -c "CHECKPOINT"
# The same rows, every tenth written with its window, as an application
# would write them.
from=$(date -u -d '1 day ago' +%FT%TZ)
until=$(date -u -d '30 days' +%FT%TZ)
awk -v from="$from" -v until="$until" 'BEGIN { OFS = "\t" }
    { print $0, (NR % 10 == 0 ? from : "\\N"), (NR % 10 == 0 ? until : "\\N") }' \
    "$work/rows.tsv" > "$work/timed.tsv"
psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_trust_windows"
DATABASE_URL="$pg_base/sitemapd_trust_windows" SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" migrate >/dev/null
psql -q "$pg_base/sitemapd_trust_windows" \
    -c "\\copy sitemap_urls (section, loc, lastmod, visible_from, visible_until) FROM '$work/timed.tsv'" \
    -c "VACUUM ANALYZE sitemap_urls" -c "CHECKPOINT"

# Runs the binary on the run's copy with the variant's settings.
run_binary() {
    local variant=$1
    shift
    local settings=(DATABASE_URL="$pg_base/sitemapd_trust_run" SITEMAPD_BASE_URL=http://localhost:8080/
                    SITEMAPD_FOLD_BATCH_ROWS="$rows" SITEMAPD_LISTEN="$listen"
                    SITEMAPD_WARM_UP_INTERVAL_MS=0 SITEMAPD_PAGE_CACHE_BYTES=0)
    [[ $variant == robots ]] && settings+=(SITEMAPD_ROBOTS_FILE="$work/robots.txt")
    # exec: a server started in the background is the process $! names.
    exec env "${settings[@]}" "$binary" "$@"
}

# One fold of every row, then three crawls: prints
# "rows fold-seconds left-out pages crawl-seconds".
timed_run() {
    local variant=$1 template=sitemapd_trust
    [[ $variant == windows ]] && template=sitemapd_trust_windows
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_trust_run" \
        -c "CREATE DATABASE sitemapd_trust_run TEMPLATE $template" -c "CHECKPOINT"
    local folded left_out
    folded=$(run_binary "$variant" fold 2>/dev/null | awk 'NR == 1 { print $2, $5 }')
    left_out=$(psql -qAt "$pg_base/sitemapd_trust_run" \
        -c "SELECT count(*) FROM sitemap_placements WHERE skip_reason IS NOT NULL")
    # A fresh start: nothing built, nothing cached.
    run_binary "$variant" serve >/dev/null 2>&1 &
    server=$!
    until curl -s -o /dev/null "http://$listen/robots.txt"; do sleep 0.05; done
    local start pages
    start=$(date +%s.%N)
    pages=$(curl -sf "http://$listen/sitemap_index.xml" | grep -o '<loc>[^<]*</loc>' | sed 's/<[^>]*>//g')
    for pass in 1 2 3; do
        for page in $pages; do
            curl -sf -o /dev/null "http://$listen${page#http://localhost:8080}"
        done
    done
    echo "$folded $left_out $(wc -w <<< "$pages") $(echo "$(date +%s.%N) - $start" | bc)"
    [[ -n $folded ]] || { echo "the fold printed nothing" >&2; exit 1; }
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
}

variants=(plain robots windows)
for run in $(seq 1 "$runs"); do
    # Each run starts with the next variant, so none always follows the
    # same one (and its writes).
    for i in 0 1 2; do
        variant=${variants[$(((run - 1 + i) % 3))]}
        read -r folded seconds left_out pages crawl <<< "$(timed_run "$variant")"
        echo "run $run: $variant: fold of $folded rows: $seconds s, $left_out left out; 3 crawls of $pages pages: $crawl s"
    done
done
psql -q "$pg_base/postgres" -c "DROP DATABASE sitemapd_trust_run" -c "DROP DATABASE sitemapd_trust_windows" \
    -c "DROP DATABASE sitemapd_trust"
