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

# The same shape as scripts/bench_import.sh: three sections, locs in hash
# order, every field set.
python3 - "$lines" "$work/urls.jsonl" <<'PY'
import hashlib, sys
lines, path = int(sys.argv[1]), sys.argv[2]
sections = ["blog", "products", "news"]
with open(path, "w") as out:
    for i in range(lines):
        section = sections[i % 3]
        slug = hashlib.md5(str(i).encode()).hexdigest()[:10]
        out.write('{"loc": "http://localhost:8080/%s/%s-%d", "lastmod": "2026-10-%02dT12:00:00Z", '
                  '"changefreq": "weekly", "priority": 0.5, "section": "%s"}\n'
                  % (section, slug, i, 1 + i % 28, section))
PY

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
