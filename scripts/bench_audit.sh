#!/usr/bin/env bash
# Whether the URL audit slows serving: one replica over a database of
# 100,000 URLs, wrk on a cached page and on 304s (16 connections) while the
# site's audit is off, and while it runs at RATE requests a second against
# a local nginx (every URL answers a small HTML page), alternating, ROUNDS
# rounds. The audit is switched on and off with SQL (UPDATE sitemap_sites
# SET audit = …) on the same running replica. Prints
# the medians, their ratio, and how many URLs the audit checked meanwhile.
#
#   scripts/bench_audit.sh [--rate N] [--rounds N] [--seconds N] BINARY
#
# Needs psql, curl, wrk and nginx (apt-get install wrk nginx-light), and
# PostgreSQL on 127.0.0.1:5432. Listens on 127.0.0.1:18750-18752 only;
# creates and drops sitemapd_bench_audit.
set -euo pipefail

rate=500
rounds=3
seconds=10
while (($#)); do
    case "$1" in
        --rate) rate=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: $0 [--rate N] [--rounds N] [--seconds N] BINARY" >&2; exit 2; }
binary=$(realpath "$1")
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

pg=postgres://postgres@127.0.0.1:5432
db=sitemapd_bench_audit
export RUST_LOG=warn SITEMAPD_BASE_URL=https://www.example.com/ DATABASE_URL=$pg/$db

cat >"$work/nginx.conf" <<NGINX
pid $work/nginx.pid;
error_log $work/error.log;
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work;
    proxy_temp_path $work;
    fastcgi_temp_path $work;
    uwsgi_temp_path $work;
    scgi_temp_path $work;
    server {
        listen 127.0.0.1:18752;
        default_type text/html;
        location / { return 200 "<!doctype html><title>page</title><p>a page</p>"; }
    }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work"

psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $db"
"$binary" migrate >/dev/null
psql -q "$pg/$db" -c "INSERT INTO sitemap_urls (loc, lastmod)
    SELECT 'https://www.example.com/p/' || n, now() FROM generate_series(1, 100000) n"
# The primary site is configured: its audit settings come with it.
export SITEMAPD_AUDIT_ORIGIN=http://127.0.0.1:18752 SITEMAPD_AUDIT_REQUESTS_PER_SECOND=$rate
"$binary" fold >/dev/null

SITEMAPD_LISTEN=127.0.0.1:18750 SITEMAPD_METRICS_LISTEN=127.0.0.1:18751 \
    "$binary" serve >"$work/serve.log" 2>&1 &
pids+=($!)
until curl -sf -o /dev/null http://127.0.0.1:18750/readyz; do sleep 0.05; done

page=/sitemap-1.xml.gz
etag=$(curl -sf -D - -o /dev/null -H 'Host: www.example.com' "http://127.0.0.1:18750$page" |
    awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r')
rps() {
    wrk -t2 -c16 -d"${seconds}s" -H 'Host: www.example.com' "$@" "http://127.0.0.1:18750$page" |
        awk '/Requests\/sec/ {print $2}'
}
checked() { psql -qAt "$pg/$db" -c "SELECT count(*) FROM sitemap_audits"; }
for ((round = 1; round <= rounds; round++)); do
    for audit in off on; do
        psql -q "$pg/$db" -c "UPDATE sitemap_sites SET audit = $([[ $audit == on ]] && echo true || echo false)"
        # the auditor looks at the sites again within its idle minute;
        # wait until it is fetching
        if [[ $audit == on ]]; then
            before=$(checked)
            until (($(checked) > before)); do sleep 0.2; done
        fi
        before=$(checked)
        cached=$(rps)
        revalidated=$(rps -H "If-None-Match: $etag")
        echo "$audit $cached $revalidated $(($(checked) - before))" >>"$work/runs"
    done
done
python3 - "$work/runs" "$seconds" "$rate" <<'PY'
import statistics, sys
runs, seconds, rate = {}, int(sys.argv[2]), sys.argv[3]
for line in open(sys.argv[1]):
    audit, cached, revalidated, checked = line.split()
    runs.setdefault(audit, []).append((float(cached), float(revalidated), int(checked)))
print(f"| 16 connections | audit off, median req/s | audit on ({rate}/s), median | on/off |")
print("|---|---|---|---|")
for index, name in ((0, "cached page"), (1, "304")):
    off = statistics.median(r[index] for r in runs["off"])
    on = statistics.median(r[index] for r in runs["on"])
    print(f"| {name} | {off:,.0f} | {on:,.0f} | **{on / off:.3f}×** |")
checked = [r[2] for r in runs["on"]]
print(f"URLs the audit checked per round of 2 × {seconds} s: {checked}")
PY
