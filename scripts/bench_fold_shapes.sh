#!/usr/bin/env bash
# One fold of each shape of bulk change, for two builds side by side: the
# same 1M rows (three sections, as bench_bulk.sh writes them) in a database
# migrated by each binary, then, timed with psql and alternating between
# the builds, a fold of
#   new:     the 1M rows, new;
#   update:  all of them, lastmod changed in one transaction;
#   delete:  half of them deleted and a tenth of the rest renamed.
# Each timed fold runs --runs times, each on a copy of the database made
# for it, and commits; the fold before the next shape is committed too.
# Folds run as the service runs them, in batches of 1,000,000: a build
# whose service numbers the rows (sitemap_fold_begin in its schema) by its
# `fold` command, timed as the command reports the fold's transaction; an
# earlier build by its schema's sitemap_fold() in psql (REPEATABLE READ,
# the fold's lock, work_mem 64MB, jit off), timed around psql.
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
now() { date +%s.%N; }
# Whether build $1's schema leaves numbering to its service.
service_folds() {
    [[ $(psql -qAt "$pg_base/sitemapd_shapes_$1" \
        -c "SELECT to_regprocedure('sitemap_fold_begin(bigint)') IS NOT NULL") == t ]]
}
# Runs build $1's fold command on database $2: prints what it prints.
fold_command() {
    DATABASE_URL="$pg_base/$2" SITEMAPD_BASE_URL=http://localhost:8080/ SITEMAPD_FOLD_BATCH_ROWS=1000000 \
        "${binaries[$1]}" fold 2>/dev/null
}
# Folds build $1's database until the pass is done, committing each fold.
fold_all() {
    if service_folds "$1"; then
        fold_command "$1" "sitemapd_shapes_$1" >/dev/null
    else
        while [[ $(psql -qAt "$pg_base/sitemapd_shapes_$1" -c "$(fold_sql COMMIT)" | tail -n 1) != *"|t" ]]; do :; done
    fi
}
# One fold of a batch on build $1's database, left as it was: prints
# "rows seconds".
timed_fold() {
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_shapes_run" \
        -c "CREATE DATABASE sitemapd_shapes_run TEMPLATE sitemapd_shapes_$1"
    if service_folds "$1"; then
        fold_command "$1" sitemapd_shapes_run | awk 'NR == 1 { print $2, $5 }'
    else
        start=$(now)
        folded=$(psql -qAt "$pg_base/sitemapd_shapes_run" -c "$(fold_sql COMMIT)" | tail -n 1)
        echo "${folded%%|*} $(echo "$(now) - $start" | bc)"
    fi
    psql -q "$pg_base/postgres" -c "DROP DATABASE sitemapd_shapes_run"
}

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
            timed=$(timed_fold "$i")
            read -r folded seconds <<< "$timed"
            echo "$shape run $run: ${binaries[$i]}: fold of $folded rows: $seconds s"
        done
    done
    for i in 0 1; do
        fold_all "$i"
    done
done
for i in 0 1; do
    psql -q "$pg_base/postgres" -c "DROP DATABASE sitemapd_shapes_$i"
done
