#!/usr/bin/env bash
# Cached pages and 304s against nginx serving the same file, as a static
# server runs in production:
#   - sitemapd: `serve` at its defaults (RUST_LOG unset, the crawler ledger
#     on), its log to a file as a service manager would keep it;
#   - nginx "production": two workers, sendfile, tcp_nopush, open_file_cache,
#     keepalive_requests 1000 (its default), and the access log on, buffered
#     (combined format, buffer=64k flush=1s);
#   - nginx "bare": the same without the access log, the fastest it goes;
#   - with --floor, the HTTP stack's floor (examples/http_floor.rs: hyper
#     answering every request with sitemapd's `304`, nothing else), in the
#     `304` rounds: what sitemapd costs above it is its own.
# One database of ROWS plain-SQL rows (pages of 50,000 URLs), placed by
# `sitemapd fold`; wrk -t2 on the first page the index lists (with --last,
# the last one), 16 and 64 connections,
# ROUNDS rounds, each round running every server in turn; prints the
# medians and each server's ratio to nginx "production". Several builds
# can be given: each serves on a port of its own, side by side.
#
#   scripts/bench_static.sh [--rows N] [--rounds N] [--seconds N] [--last]
#       [--floor FLOOR_BINARY] BINARY...
#
# where FLOOR_BINARY is built by `cargo build --release --example http_floor`
# (target/release/examples/http_floor). SITEMAPD_* settings in the
# environment reach every sitemapd run, e.g. SITEMAPD_MAX_URLS=50 for an
# index of many small pages.
#
# Needs psql, curl, wrk and nginx (apt-get install wrk nginx-light), and
# PostgreSQL on 127.0.0.1:5432. Listens on 127.0.0.1:18760-18779 only;
# creates and drops sitemapd_bench_static.
set -euo pipefail

rows=1000000
rounds=3
seconds=8
floor=
pick=1p
while (($#)); do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --floor) floor=$(realpath "$2"); shift 2 ;;
        --last) pick='$p'; shift ;;
        *) break ;;
    esac
done
(($# >= 1)) || {
    echo "usage: $0 [--rows N] [--rounds N] [--seconds N] [--last] [--floor FLOOR_BINARY] BINARY..." >&2
    exit 2
}
binaries=()
for binary in "$@"; do binaries+=("$(realpath "$binary")"); done
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
    psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
}
trap cleanup EXIT

pg=postgres://postgres@127.0.0.1:5432
db=sitemapd_bench_static
export SITEMAPD_BASE_URL=http://localhost:8080/ DATABASE_URL=$pg/$db
unset RUST_LOG

PG_BASE=$pg "$here/scripts/seed_placed.sh" "${binaries[0]}" "$db" "$rows"

names=()
ports=()
port=18760
for i in "${!binaries[@]}"; do
    SITEMAPD_LISTEN=127.0.0.1:$port SITEMAPD_METRICS_LISTEN=127.0.0.1:$((port + 1)) \
        "${binaries[$i]}" serve >"$work/serve-$port.log" 2>&1 &
    pids+=($!)
    until curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"; do sleep 0.05; done
    names+=("sitemapd-$((i + 1))")
    ports+=("$port")
    port=$((port + 2))
done
# The first (or last) page the index lists.
page=$(curl -sf -H 'Host: localhost:8080' "http://127.0.0.1:${ports[0]}/sitemap_index.xml" |
    grep -o '<loc>[^<]*</loc>' | sed -n "$pick" | sed 's|<loc>http://localhost:8080||; s|</loc>||')
mkdir -p "$work/root"
curl -sf -o "$work/root$page" -H 'Host: localhost:8080' "http://127.0.0.1:${ports[0]}$page"
for binary_port in "${ports[@]:1}"; do
    curl -sf -H 'Host: localhost:8080' "http://127.0.0.1:$binary_port$page" | cmp - "$work/root$page"
done
chmod 644 "$work/root$page"
chmod 755 "$work/root"

# nginx NAME PORT ACCESS_LOG
nginx_conf() {
    cat <<EOF
worker_processes auto;
pid $work/nginx-$1.pid;
error_log $work/nginx-$1-error.log;
daemon off;
events { worker_connections 1024; }
http {
    $3
    sendfile on;
    tcp_nopush on;
    open_file_cache max=1000 inactive=20s;
    types { application/gzip gz; }
    server {
        listen 127.0.0.1:$2;
        root $work/root;
    }
}
EOF
}
for kind in production bare; do
    if [[ $kind == production ]]; then
        log="access_log $work/access.log combined buffer=64k flush=1s;"
    else
        log="access_log off;"
    fi
    nginx_conf "$kind" "$port" "$log" >"$work/nginx-$kind.conf"
    nginx -c "$work/nginx-$kind.conf" -p "$work" 2>/dev/null &
    pids+=($!)
    until curl -sf -o /dev/null "http://127.0.0.1:$port$page"; do sleep 0.05; done
    names+=("nginx-$kind")
    ports+=("$port")
    port=$((port + 2))
done
if [[ -n $floor ]]; then
    "$floor" "127.0.0.1:$port" >"$work/floor.log" 2>&1 &
    pids+=($!)
    until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.05; done
    names+=("http-floor")
    ports+=("$port")
    port=$((port + 2))
fi

etag_of() {
    curl -sf -D - -o /dev/null -H 'Host: localhost:8080' "http://127.0.0.1:$1$page" |
        awk 'tolower($1) == "etag:" {print $2}' | tr -d '\r'
}
rps() {
    wrk -t2 -c"$1" -d"${seconds}s" -H 'Host: localhost:8080' \
        -H 'User-Agent: Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)' \
        "${@:3}" "http://127.0.0.1:$2$page" | awk '/Requests\/sec/ {print $2}'
}
for ((round = 1; round <= rounds; round++)); do
    for kind in cached 304; do
        for connections in 16 64; do
            for i in "${!names[@]}"; do
                [[ ${names[$i]} == http-floor && $kind != 304 ]] && continue
                extra=()
                [[ $kind == 304 ]] && extra=(-H "If-None-Match: $(etag_of "${ports[$i]}")")
                echo "$kind $connections ${names[$i]} $(rps "$connections" "${ports[$i]}" "${extra[@]}")" >>"$work/rps"
            done
        done
    done
done
for i in "${!binaries[@]}"; do echo "${names[$i]}: ${binaries[$i]}"; done
[[ -n $floor ]] && echo "http-floor: $floor"
echo "page: $(stat -c %s "$work/root$page") bytes; $rows rows; $rounds rounds of ${seconds} s"
python3 - "$work/rps" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kind, connections, name, rps = line.split()
    runs.setdefault((kind, int(connections)), {}).setdefault(name, []).append(float(rps))
names = list(dict.fromkeys(n for by in runs.values() for n in by))
print("| | " + " | ".join(f"{n} req/s (ratio)" for n in names) + " |")
print("|---" * (len(names) + 1) + "|")
for (kind, connections), by in runs.items():
    base = statistics.median(by["nginx-production"])
    cells = []
    for name in names:
        if name not in by:
            cells.append("–")
            continue
        median = statistics.median(by[name])
        cells.append(f"{median:,.0f} ({median / base:.2f}×)")
    print(f"| {kind} page, {connections} connections | " + " | ".join(cells) + " |")
print()
print("rounds: " + "; ".join(f"{k} c{c} {n} " + "/".join(f"{v:.0f}" for v in vs)
                             for (k, c), by in runs.items() for n, vs in by.items()))
PY
