#!/usr/bin/env bash
# Time from `sitemapd serve` starting to /healthz and to /readyz answering
# 200, behind a backlog of ROWS rows written with plain SQL while the
# service was down. Builds alternate, each run on a fresh database.
#
#   scripts/bench_startup.sh [--rows N] [--runs N] BINARY [BINARY...]
#
# Needs psql, curl and bc, and PostgreSQL on 127.0.0.1:5432 (trust auth).
# Listens on 127.0.0.1:18080 and 127.0.0.1:18081 only.
set -euo pipefail

rows=1000000
runs=3
binaries=()
while (($#)); do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) binaries+=("$1"); shift ;;
    esac
done
((${#binaries[@]})) || { echo "usage: $0 [--rows N] [--runs N] BINARY [BINARY...]" >&2; exit 2; }

db=sitemapd_bench_startup
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$db
export SITEMAPD_BASE_URL=https://www.example.com/ RUST_LOG=warn
export SITEMAPD_LISTEN=127.0.0.1:18080 SITEMAPD_METRICS_LISTEN=127.0.0.1:18081

seconds_since() { echo "$(date +%s.%N) - $1" | bc; }

for run in $(seq 1 "$runs"); do
    for binary in "${binaries[@]}"; do
        psql -h 127.0.0.1 -U postgres -q -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" 2>/dev/null
        "$binary" migrate >/dev/null 2>&1
        psql -h 127.0.0.1 -U postgres -q "$db" -c \
            "INSERT INTO sitemap_urls (loc) SELECT 'https://www.example.com/bulk/' || g FROM generate_series(1, $rows) g"
        started=$(date +%s.%N)
        "$binary" serve >/dev/null 2>&1 &
        pid=$!
        alive= ready=
        while [ -z "$ready" ]; do
            if [ -z "$alive" ] && curl -sf -o /dev/null http://127.0.0.1:18080/healthz; then
                alive=$(seconds_since "$started")
            fi
            if curl -sf -o /dev/null http://127.0.0.1:18080/readyz; then
                ready=$(seconds_since "$started")
            fi
            if (($(echo "$(seconds_since "$started") > 600" | bc))); then
                echo "$binary: not ready within 600 s" >&2
                break
            fi
            sleep 0.02
        done
        kill -TERM "$pid"
        wait "$pid" || true
        printf 'run %s  %s  rows %s  /healthz %.3f s  /readyz %.3f s\n' \
            "$run" "$binary" "$rows" "${alive:-0}" "${ready:-0}"
    done
done
psql -h 127.0.0.1 -U postgres -q -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
