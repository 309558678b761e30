#!/usr/bin/env bash
# What judging every loc against robots.txt costs a fold: one fold of the
# same 1M new rows (three sections, as bench_bulk.sh writes them), by the
# `fold` command in one batch as the service sizes its largest, with no
# robots text and with one of 50 rules (two groups: `*`, and Googlebot's
# own), alternating, each run on a fresh copy of the database. The rules
# leave some 0.4% of the rows out.
#
#   scripts/bench_robots.sh [--rows N] [--runs N] BINARY
#
# Needs psql and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops sitemapd_robots
# and sitemapd_robots_run.
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
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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
    echo "Allow: /news/*-item-770"
} > "$work/robots.txt"
echo "robots.txt: $(grep -ci '^\(dis\)\?allow:' "$work/robots.txt") rules"

psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_robots"
DATABASE_URL="$pg_base/sitemapd_robots" SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" migrate >/dev/null
psql -q "$pg_base/sitemapd_robots" -c "\\copy sitemap_urls (section, loc, lastmod) FROM '$work/rows.tsv'" \
    -c "VACUUM ANALYZE sitemap_urls" -c "CHECKPOINT"

# One fold of every row on a fresh copy, with robots file $1 (or none):
# prints "rows seconds left-out".
timed_fold() {
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_robots_run" \
        -c "CREATE DATABASE sitemapd_robots_run TEMPLATE sitemapd_robots"
    local folded
    folded=$(env DATABASE_URL="$pg_base/sitemapd_robots_run" SITEMAPD_BASE_URL=http://localhost:8080/ \
        SITEMAPD_FOLD_BATCH_ROWS="$rows" ${1:+SITEMAPD_ROBOTS_FILE="$1"} \
        "$binary" fold 2>/dev/null | awk 'NR == 1 { print $2, $5 }')
    echo "$folded $(psql -qAt "$pg_base/sitemapd_robots_run" \
        -c "SELECT count(*) FROM sitemap_placements WHERE skip_reason = 'robots-disallowed'")"
}

for run in $(seq 1 "$runs"); do
    for robots in "" "$work/robots.txt"; do
        read -r folded seconds left_out <<< "$(timed_fold "$robots")"
        label=without
        [[ -n $robots ]] && label=with
        echo "run $run: $label robots.txt: fold of $folded rows: $seconds s, $left_out left out"
    done
done
psql -q "$pg_base/postgres" -c "DROP DATABASE sitemapd_robots_run" -c "DROP DATABASE sitemapd_robots"
