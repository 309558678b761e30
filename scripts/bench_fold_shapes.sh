#!/usr/bin/env bash
# One fold of each shape of bulk change, for two builds side by side: the
# same 1M rows (three sections, as bench_bulk.sh writes them) in a database
# migrated by each binary, then, timed with psql and alternating between
# the builds, a fold of
#   new:     the 1M rows, new;
#   update:  all of them, lastmod changed in one transaction;
#   delete:  half of them deleted and a tenth of the rest renamed.
# Each timed fold is rolled back and run --runs times; the fold before the
# next shape is committed. Folds run as the service runs them (REPEATABLE
# READ, the fold's lock, work_mem 64MB, jit off, batches of 1,000,000).
#
#   scripts/bench_fold_shapes.sh [--rows N] [--runs N] BINARY_A BINARY_B
#
# Needs psql and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops sitemapd_shapes_a
# and sitemapd_shapes_b.
set -euo pipefail

rows=1000000
runs=2
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -eq 2 ]] || { echo "usage: $0 [--rows N] [--runs N] BINARY_A BINARY_B" >&2; exit 2; }
binaries=("$1" "$2")
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

psql -qAt "$pg_base/postgres" -v rows="$rows" -f "$(dirname "$0")/bulk_rows.sql" > "$work/rows.tsv"

fold_sql() {
    echo "BEGIN ISOLATION LEVEL REPEATABLE READ;
LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE;
SET LOCAL work_mem = '64MB';
SET LOCAL jit = off;
SELECT folded, caught_up FROM sitemap_fold(1000000);
$1;"
}
# Folds until the pass is done, committing each fold.
fold_all() {
    while [[ $(psql -qAt "$1" -c "$(fold_sql COMMIT)" | tail -n 1) != *"|t" ]]; do :; done
}
now() { date +%s.%N; }

for i in 0 1; do
    db=sitemapd_shapes_$i
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
    DATABASE_URL="$pg_base/$db" SITEMAPD_BASE_URL=http://localhost:8080/ "${binaries[$i]}" migrate >/dev/null
    psql -q "$pg_base/$db" -c "\\copy sitemap_urls (section, loc, lastmod) FROM '$work/rows.tsv'" \
        -c "VACUUM ANALYZE sitemap_urls"
done

for shape in new update delete; do
    for i in 0 1; do
        db="$pg_base/sitemapd_shapes_$i"
        case $shape in
            update) psql -q "$db" -c "UPDATE sitemap_urls SET lastmod = lastmod + interval '1 day'" ;;
            delete) psql -q "$db" -c "DELETE FROM sitemap_urls WHERE id % 2 = 0" \
                        -c "UPDATE sitemap_urls SET loc = loc || '-renamed' WHERE id % 10 = 1" ;;
        esac
        psql -q "$db" -c "VACUUM ANALYZE sitemap_urls" -c "CHECKPOINT"
    done
    for run in $(seq 1 "$runs"); do
        for i in 0 1; do
            start=$(now)
            folded=$(psql -qAt "$pg_base/sitemapd_shapes_$i" -c "$(fold_sql ROLLBACK)" | tail -n 1)
            echo "$shape run $run: ${binaries[$i]}: fold of ${folded%%|*} rows: $(echo "$(now) - $start" | bc) s"
        done
    done
    for i in 0 1; do
        fold_all "$pg_base/sitemapd_shapes_$i"
    done
done
for i in 0 1; do
    psql -q "$pg_base/postgres" -c "DROP DATABASE sitemapd_shapes_$i"
done
