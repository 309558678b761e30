#!/usr/bin/env bash
# What the request benchmarks serve: a fresh database DB of ROWS plain-SQL
# rows in three sections (bulk_rows.sql), placed by BINARY's `sitemapd
# fold`, then vacuumed. PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); the service's settings come from
# the environment (SITEMAPD_BASE_URL, …). Prints the commands' logs only
# when one fails.
#
#   scripts/seed_placed.sh BINARY DB ROWS
set -euo pipefail
(($# == 3)) || { echo "usage: $0 BINARY DB ROWS" >&2; exit 2; }
binary=$1 db=$2 rows=$3
here=$(cd "$(dirname "$0")/.." && pwd)
pg=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() { "$@" >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }; }

psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $db"
run env DATABASE_URL="$pg/$db" "$binary" migrate
psql -qAt "$pg/postgres" -v rows="$rows" -f "$here/scripts/bulk_rows.sql" |
    psql -q "$pg/$db" -c "\\copy sitemap_urls (section, loc, lastmod) FROM STDIN"
run env DATABASE_URL="$pg/$db" "$binary" fold
psql -q "$pg/$db" -c "VACUUM ANALYZE"
