#!/usr/bin/env bash
# CPU per `304` of several builds, side by side: each build runs `serve` at
# its defaults over one database of ROWS plain-SQL rows (placed by
# `sitemapd fold`), and each round sends every build in turn `wrk -t2 -c16`
# for SECONDS with the first page's ETag in If-None-Match, as Googlebot
# (its User-Agent, as scripts/bench_static.sh sends). Each build's
# utime + stime (/proc/PID/stat) over the run, divided by the requests it
# answered, is its CPU per `304`; prints every round and the medians, and
# the user and system parts of each.
# Finer than the request rate when builds differ by a few percent, since
# the load generator shares the two cores.
#
#   scripts/bench_cpu_304.sh [--rows N] [--rounds N] [--seconds N] BINARY...
#
# Needs psql, curl and wrk, and PostgreSQL on 127.0.0.1:5432. Listens on
# 127.0.0.1:18800-18819 only; creates and drops sitemapd_bench_cpu_304.
set -euo pipefail

rows=200000
rounds=5
seconds=5
while [[ $# -gt 0 ]]; do
    case $1 in
        --rows) rows=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -ge 1 && $# -le 10 ]] || {
    echo "usage: $0 [--rows N] [--rounds N] [--seconds N] BINARY... (1 to 10)" >&2
    exit 2
}
binaries=("$@")
here=$(cd "$(dirname "$0")/.." && pwd)
pg=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_cpu_304
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

export SITEMAPD_BASE_URL=http://localhost:8080/ DATABASE_URL=$pg/$db
PG_BASE=$pg "$here/scripts/seed_placed.sh" "${binaries[0]}" "$db" "$rows"

port_of() { echo $((18800 + 2 * $1)); }
for i in "${!binaries[@]}"; do
    port=$(port_of "$i")
    SITEMAPD_LISTEN=127.0.0.1:$port SITEMAPD_METRICS_LISTEN=127.0.0.1:$((port + 1)) \
        "${binaries[$i]}" serve >"$work/serve-$port.log" 2>&1 &
    pids+=($!)
done
for i in "${!binaries[@]}"; do
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$(port_of "$i")/healthz" >/dev/null && break
        sleep 0.1
    done
done

host='Host: localhost:8080'
googlebot='User-Agent: Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)'
page=$(curl -sf -H "$host" "http://127.0.0.1:$(port_of 0)/sitemap_index.xml" |
    grep -o 'sitemap-[^<]*\.xml\.gz' | head -1)
etag=$(curl -sfI -H "$host" "http://127.0.0.1:$(port_of 0)/$page" |
    awk 'tolower($1) == "etag:" { print $2 }' | tr -d '\r')
[[ -n $page && -n $etag ]] || { echo "no page to ask for" >&2; exit 1; }
echo "page: $page ($etag); $rows rows; $rounds rounds of $seconds s"

ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
declare -A per_request user system
tick_us=$((1000000 / $(getconf CLK_TCK)))
# microseconds per request of TICKS (an expression), over $requests
per() { echo "scale=2; $1 * $tick_us / $requests" | bc; }
for round in $(seq 1 "$rounds"); do
    for i in "${!binaries[@]}"; do
        read -r user_before system_before < <(ticks "${pids[$i]}")
        out=$(wrk -t2 -c16 -d"${seconds}s" -H "$host" -H "If-None-Match: $etag" -H "$googlebot" \
            "http://127.0.0.1:$(port_of "$i")/$page")
        read -r user_after system_after < <(ticks "${pids[$i]}")
        requests=$(awk '/requests in/ { print $1 }' <<<"$out")
        rate=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
        u=$(per "($user_after - $user_before)")
        s=$(per "($system_after - $system_before)")
        us=$(per "($user_after - $user_before + $system_after - $system_before)")
        per_request[$i]+="$us "
        user[$i]+="$u "
        system[$i]+="$s "
        printf 'round %d, %s: %s requests/s, %s us CPU per 304 (user %s, system %s)\n' \
            "$round" "${binaries[$i]}" "$rate" "$us" "$u" "$s"
    done
done
median() {
    tr ' ' '\n' <<<"$1" | grep . | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for i in "${!binaries[@]}"; do
    printf 'median, %s: %s us CPU per 304 (user %s, system %s)\n' "${binaries[$i]}" \
        "$(median "${per_request[$i]}")" "$(median "${user[$i]}")" "$(median "${system[$i]}")"
done
