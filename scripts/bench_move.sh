#!/usr/bin/env bash
# A site's move between cells, timed: two primaries (initdb) on loopback
# ports, `serve` at its defaults on each, a site of ROWS URLs placed in the
# first; then `sitemapd sites move` to the second while an application
# writes the site (INSERTs and UPDATEs, WRITES_PER_S, to the source until
# the move is verified, then to the target). Prints the move's own report,
# its rows/s, and the writes each cell took and refused. TRIALS times, new
# clusters each.
#
#   scripts/bench_move.sh [--rows N] [--writes-per-s N] [--trials N] BINARY
#
# Needs PostgreSQL's server packages (/usr/lib/postgresql/*/bin), curl,
# python3 with psycopg (pip install "psycopg[binary]"); run as root, the
# server's commands run as `postgres`. Listens on 127.0.0.1:18090-18093
# and 25442-25443 only.
set -euo pipefail

rows=1000000
writes_per_s=100
trials=3
while (($#)); do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --writes-per-s) writes_per_s=$2; shift 2 ;;
        --trials) trials=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: $0 [--rows N] [--writes-per-s N] [--trials N] BINARY" >&2; exit 2; }
binary=$(realpath "$1")
source "$(dirname "$0")/clusters.sh"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    clusters_stop_all
}
trap cleanup EXIT

results=()
for trial in $(seq 1 "$trials"); do
    a=postgres://postgres@127.0.0.1:25442/sitemapd
    b=postgres://postgres@127.0.0.1:25443/sitemapd
    cluster_primary "a-$trial" 25442
    cluster_primary "b-$trial" 25443
    for url in "$a" "$b"; do
        psql -q "${url%/sitemapd}/postgres" -c "CREATE DATABASE sitemapd"
        DATABASE_URL=$url RUST_LOG=warn SITEMAPD_BASE_URL=https://home.example.com/ "$binary" migrate
    done
    DATABASE_URL=$a RUST_LOG=warn SITEMAPD_BASE_URL=https://home.example.com/ \
        "$binary" sites add big --base-url https://big.example.com/ >/dev/null
    psql -q "$a" -c "INSERT INTO sitemap_urls (site, loc, lastmod)
                     SELECT 'big', 'https://big.example.com/p/' || g, now() - g * interval '1 second'
                     FROM generate_series(1, $rows) g"
    DATABASE_URL=$a RUST_LOG=warn SITEMAPD_BASE_URL=https://home.example.com/ "$binary" fold >/dev/null
    port=18090
    for url in "$a" "$b"; do
        DATABASE_URL=$url RUST_LOG=warn SITEMAPD_BASE_URL=https://home.example.com/ \
        SITEMAPD_LISTEN=127.0.0.1:$port SITEMAPD_METRICS_LISTEN=127.0.0.1:$((port + 1)) \
            "$binary" serve >"$cluster_work/serve-$port-$trial.log" 2>&1 &
        pids+=($!)
        until curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"; do sleep 0.05; done
        port=$((port + 2))
    done

    switched=$cluster_work/switched-$trial
    python3 - "$a" "$b" "$writes_per_s" "$switched" >"$cluster_work/writer-$trial" <<'PY' &
import os, sys, time
import psycopg

source, target, per_s, switched = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
conns = [psycopg.connect(source, autocommit=True), psycopg.connect(target, autocommit=True)]
taken, refused, n = [0, 0], 0, 0
started = time.time()
while time.time() - started < 600:
    cell = 1 if os.path.exists(switched) else 0
    n += 1
    try:
        if n % 2:
            conns[cell].execute(
                "INSERT INTO sitemap_urls (site, loc) VALUES ('big', %s)",
                (f"https://big.example.com/w/{n}",))
        else:
            conns[cell].execute(
                "UPDATE sitemap_urls SET lastmod = now() WHERE site = 'big' AND loc = %s",
                (f"https://big.example.com/p/{n}",))
        taken[cell] += 1
    except psycopg.Error as error:
        if error.sqlstate != "SD001":
            raise
        refused += 1
    if os.path.exists(switched + ".stop"):
        break
    time.sleep(max(0.0, started + n / per_s - time.time()))
print(taken[0], taken[1], refused)
PY
    writer=$!
    sleep 2
    begun=$(date +%s.%N)
    DATABASE_URL=$a RUST_LOG=warn SITEMAPD_BASE_URL=https://home.example.com/ \
        "$binary" sites move big --to "$b" --upstream cell_b | tee "$cluster_work/move-$trial"
    took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$begun" "$(date +%s.%N)")
    touch "$switched"
    sleep 2
    touch "$switched.stop"
    wait "$writer"
    read -r taken_a taken_b refused <"$cluster_work/writer-$trial"
    finish_begun=$(date +%s.%N)
    DATABASE_URL=$a RUST_LOG=warn SITEMAPD_BASE_URL=https://home.example.com/ \
        "$binary" sites move big --to "$b" --finish
    finish_took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$finish_begun" "$(date +%s.%N)")
    refused_for=$(grep -o 'writes refused for [0-9.]* s' "$cluster_work/move-$trial" | grep -o '[0-9.]*')
    echo "trial $trial: move $took s ($(python3 -c "print(round($rows / $took))") rows/s), writes refused for $refused_for s; writes taken by the source $taken_a, by the target $taken_b, refused $refused; --finish $finish_took s"
    results+=("$took $refused_for $finish_took")
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" || true; done
    pids=()
    cluster_ctl "a-$trial" -m immediate -w stop
    cluster_ctl "b-$trial" -m immediate -w stop
done
printf '%s\n' "${results[@]}" | python3 -c "
import statistics, sys
rows = [[float(x) for x in line.split()] for line in sys.stdin if line.strip()]
took = statistics.median(r[0] for r in rows)
print(f'median over {len(rows)} trials: move {took:.2f} s = {$rows / took:,.0f} rows/s; '
      f'writes refused for {statistics.median(r[1] for r in rows):.2f} s; '
      f'--finish {statistics.median(r[2] for r in rows):.2f} s')"
