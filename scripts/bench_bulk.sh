#!/usr/bin/env bash
# Plain-SQL bulk load, side by side: the same N rows are COPYed into
# sitemap_urls (with its triggers) and into a copy of it with the same
# columns, defaults, CHECKs and indexes but no triggers, alternating, in one
# run (which goes first alternates over runs); then the service's folds
# place the sitemap_urls rows, timed on their own: one fold per batch of
# --batch rows (the service's fold_batch_rows, 1,000,000), as the service
# runs them, until the pass is done, while a second connection writes the
# feed entries they keep out to the feed, as the service's writer does.
# A build whose service numbers the rows folds by its `fold` command, an
# earlier one by its schema's sitemap_fold() in psql.
# Both times are printed: rows on their pages, and the feed written too.
#
#   scripts/bench_bulk.sh [--rows N] [--runs N] [--batch N] BINARY
#
# Needs psql and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops sitemapd_bench_bulk.
set -euo pipefail

rows=10000000
runs=2
batch=1000000
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -eq 1 ]] || { echo "usage: $0 [--rows N] [--runs N] [--batch N] BINARY" >&2; exit 2; }
binary=$1
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_bulk
url="$pg_base/$db"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

psql -qAt "$pg_base/postgres" -v rows="$rows" -f "$(dirname "$0")/bulk_rows.sql" > "$work/rows.tsv"

now() { date +%s.%N; }
psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
for run in $(seq 1 "$runs"); do
    DATABASE_URL=$url SITEMAPD_BASE_URL=http://localhost:8080/ "$binary" migrate >/dev/null
    psql -q "$url" -c "DROP TABLE IF EXISTS bare_urls; CREATE TABLE bare_urls (LIKE sitemap_urls INCLUDING ALL)"
    # Alternate which goes first, so neither always meets a warmer cache.
    tables="sitemap_urls bare_urls"
    (( run % 2 == 0 )) && tables="bare_urls sitemap_urls"
    for table in $tables; do
        psql -q "$url" -c "TRUNCATE $table" -c "CHECKPOINT"
        start=$(now)
        psql -q "$url" -c "\\copy $table (section, loc, lastmod) FROM '$work/rows.tsv'"
        echo "run $run: COPY into $table: $(echo "$(now) - $start" | bc) s"
    done
    psql -q "$url" -c "CHECKPOINT"
    start=$(now)
    # the feed's writer (Store::write_out_feed), until the folds are done
    # and nothing is left
    rm -f "$work/folded"
    (
        # a build from before folds kept entries has no writer
        [[ $(psql -qAt "$url" -c "SELECT to_regclass('sitemap_feed_writer') IS NOT NULL") == t ]] || exit 0
        # builds from before the write-out went by entries after the last
        # kept row: 50 kept rows from the oldest
        by_entries=$(psql -qAt "$url" -c "SELECT to_regprocedure('sitemap_write_out_feed(bigint,integer)') IS NOT NULL")
        after=0
        while :; do
            [[ -e $work/folded ]] && done_folding=1 || done_folding=0
            if [[ $by_entries == t ]]; then
                out=$(psql -qAt -F ' ' "$url" -c "BEGIN" \
                    -c "SELECT true FROM sitemap_feed_writer FOR UPDATE" \
                    -c "SELECT entries, coalesce(through_id, $after) FROM sitemap_write_out_feed($after, 100000)" \
                    -c "COMMIT" | tail -n 1)
                written=${out% *}
                after=${out#* }
            else
                written=$(psql -qAt "$url" -c "BEGIN" \
                    -c "SELECT true FROM sitemap_feed_writer FOR UPDATE" \
                    -c "SELECT sitemap_write_out_feed(50)" -c "COMMIT" | tail -n 1)
            fi
            if [[ $written == 0 ]]; then
                ((done_folding)) && break
                sleep 0.25
            fi
        done
    ) &
    writer=$!
    if [[ $(psql -qAt "$url" -c "SELECT to_regprocedure('sitemap_fold_begin(bigint)') IS NOT NULL") == t ]]; then
        # a build whose service numbers the rows: its fold command, timed
        # by what it reports of each fold (it then writes out what is left
        # of the feed, as Store::fold does)
        DATABASE_URL=$url SITEMAPD_BASE_URL=http://localhost:8080/ SITEMAPD_FOLD_BATCH_ROWS=$batch \
            "$binary" fold 2>/dev/null > "$work/folds"
        folds=$(grep -c '^folded' "$work/folds")
        seconds=$(awk '/^folded/ { s += $5 } END { print s }' "$work/folds")
    else
        folds=0
        while :; do
            # the settings the service's folds run with (Store::fold_batch)
            caught_up=$(psql -qAt "$url" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
                -c "LOCK TABLE sitemap_fold_state IN EXCLUSIVE MODE" \
                -c "SET LOCAL work_mem = '64MB'" -c "SET LOCAL jit = off" \
                -c "SELECT caught_up FROM sitemap_fold($batch)" -c "COMMIT")
            folds=$((folds + 1))
            [[ $caught_up == t ]] && break
        done
        seconds=$(echo "$(now) - $start" | bc)
    fi
    echo "run $run: fold: $seconds s in $folds folds, $(echo "$rows / $seconds" | bc) rows/s"
    touch "$work/folded"
    wait "$writer"
    seconds=$(echo "$(now) - $start" | bc)
    echo "run $run: fold and feed written out: $seconds s, $(echo "$rows / $seconds" | bc) rows/s"
    psql -q "$pg_base/postgres" -c "DROP DATABASE $db"
done
