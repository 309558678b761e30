#!/usr/bin/env bash
# An import against its floor, side by side: `sitemapd import` of N new JSON
# Lines into a fresh database, then a plain COPY of the very rows it wrote
# (exported in the order it wrote them) into a copy of sitemap_urls with the
# same columns, defaults, CHECKs and indexes and no trigger; alternating
# over runs, each timed alone.
#
#   scripts/bench_import_floor.sh [--lines N] [--runs N] BINARY
#
# Needs python3, psql and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops
# sitemapd_bench_import_floor.
set -euo pipefail

lines=1000000
runs=2
while [[ $# -gt 0 ]]; do
    case $1 in
        --lines) lines=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -eq 1 ]] || { echo "usage: $0 [--lines N] [--runs N] BINARY" >&2; exit 2; }
binary=$1
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_import_floor
url="$pg_base/$db"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 "$(dirname "$0")/gen_jsonl.py" "$lines" "$work/urls.jsonl"

now() { date +%s.%N; }
columns="site, section, loc, lastmod, changefreq, priority"
for run in $(seq 1 "$runs"); do
    PGOPTIONS="-c client_min_messages=warning" psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
    DATABASE_URL=$url SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" migrate >/dev/null 2>&1
    psql -q "$url" -c "CHECKPOINT"
    start=$(now)
    DATABASE_URL=$url SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" import "$work/urls.jsonl" --format jsonl >/dev/null 2>&1
    import=$(echo "$(now) - $start" | bc)
    psql -q "$url" -c "\\copy (SELECT $columns FROM sitemap_urls ORDER BY id) TO '$work/rows.tsv'"
    psql -q "$url" -c "CREATE TABLE bare_urls (LIKE sitemap_urls INCLUDING ALL)" -c "CHECKPOINT"
    start=$(now)
    psql -q "$url" -c "\\copy bare_urls ($columns) FROM '$work/rows.tsv'"
    copy=$(echo "$(now) - $start" | bc)
    printf 'run %d: import %.1f s, COPY of the same rows without triggers %.1f s, ratio %.2f\n' \
        "$run" "$import" "$copy" "$(echo "$import / $copy" | bc -l)"
done
psql -q "$pg_base/postgres" -c "DROP DATABASE $db"
