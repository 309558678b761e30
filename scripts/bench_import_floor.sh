#!/usr/bin/env bash
# An import against its floor, side by side: `sitemapd import` of N new JSON
# Lines into a fresh database, then a plain COPY of the very rows it wrote
# into a copy of sitemap_urls with the same columns, defaults, CHECKs and
# indexes and no trigger, twice: in the order the import wrote them (key
# order, the index's best) and in the file's order (what a plain-SQL load
# of the file does). Each timed alone, in a table of its own.
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
# The seconds a COPY of rows file $1 takes into a fresh trigger-less copy
# of the table.
bare_copy() {
    psql -q "$url" -c "CREATE TABLE bare_urls (LIKE sitemap_urls INCLUDING ALL)" -c "CHECKPOINT"
    local start
    start=$(now)
    psql -q "$url" -c "\\copy bare_urls ($columns) FROM '$1'"
    echo "$(now) - $start" | bc
    psql -q "$url" -c "DROP TABLE bare_urls"
}
for run in $(seq 1 "$runs"); do
    PGOPTIONS="-c client_min_messages=warning" psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
    DATABASE_URL=$url SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" migrate >/dev/null 2>&1
    psql -q "$url" -c "CHECKPOINT"
    start=$(now)
    DATABASE_URL=$url SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" import "$work/urls.jsonl" --format jsonl >/dev/null 2>&1
    import=$(echo "$(now) - $start" | bc)
    psql -q "$url" -c "\\copy (SELECT $columns FROM sitemap_urls ORDER BY id) TO '$work/key_order.tsv'"
    # gen_jsonl.py ends the Nth line's loc in -N.
    psql -q "$url" -c "\\copy (SELECT $columns FROM sitemap_urls ORDER BY substring(loc FROM '-([0-9]+)$')::bigint) TO '$work/file_order.tsv'"
    key_order=$(bare_copy "$work/key_order.tsv")
    file_order=$(bare_copy "$work/file_order.tsv")
    printf 'run %d: import %.1f s; COPY of the same rows without triggers in key order %.1f s (ratio %.2f), in the file'"'"'s order %.1f s (ratio %.2f)\n' \
        "$run" "$import" "$key_order" "$(echo "$import / $key_order" | bc -l)" \
        "$file_order" "$(echo "$import / $file_order" | bc -l)"
done
psql -q "$pg_base/postgres" -c "DROP DATABASE $db"
