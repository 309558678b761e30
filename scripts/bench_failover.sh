#!/usr/bin/env bash
# Failover without a restart, timed: a primary and its hot standby
# (initdb, pg_basebackup -R) on loopback ports, `serve` at its defaults
# over database_url naming both (target_session_attrs=read-write), one
# URL written through the API; then the primary is stopped (immediate) and
# the standby promoted, and the time from the stop to the first page 200
# and to the first API write accepted is measured. TRIALS times, new
# clusters each.
#
#   scripts/bench_failover.sh [--trials N] BINARY
#
# Needs PostgreSQL's server packages (/usr/lib/postgresql/*/bin), curl and
# python3; run as root, the server's commands run as `postgres`. Listens on
# 127.0.0.1:18080-18081 and 25432-25433 only.
set -euo pipefail

trials=5
while (($#)); do
    case "$1" in
        --trials) trials=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# == 1)) || { echo "usage: $0 [--trials N] BINARY" >&2; exit 2; }
binary=$(realpath "$1")
source "$(dirname "$0")/clusters.sh"
token=smd_bench-failover-token
serve_pid=
cleanup() {
    [[ -n $serve_pid ]] && kill -TERM "$serve_pid" 2>/dev/null
    clusters_stop_all
}
trap cleanup EXIT

now() { date +%s.%N; }

results=()
for trial in $(seq 1 "$trials"); do
    primary=primary-$trial standby=standby-$trial
    cluster_primary "$primary" 25432
    psql -q postgres://postgres@127.0.0.1:25432/postgres -c "CREATE DATABASE sitemapd"
    cluster_standby "$standby" 25433 25432

    DATABASE_URL="postgres://postgres@127.0.0.1:25432,127.0.0.1:25433/sitemapd?target_session_attrs=read-write" \
    RUST_LOG=warn SITEMAPD_BASE_URL=https://www.example.com/ \
    SITEMAPD_LISTEN=127.0.0.1:18080 SITEMAPD_METRICS_LISTEN=127.0.0.1:18081 \
    SITEMAPD_API_TOKEN_HASHES="[\"sha256:$(printf %s "$token" | sha256sum | cut -d' ' -f1)\"]" \
        "$binary" serve >"$cluster_work/serve-$trial.log" 2>&1 &
    serve_pid=$!
    until curl -sf -o /dev/null http://127.0.0.1:18080/readyz; do sleep 0.05; done

    curl -sf -o /dev/null -X PUT -H "Authorization: Bearer $token" -H "Content-Type: application/json" \
        --data '[{"loc": "https://www.example.com/before"}]' http://127.0.0.1:18080/api/v1/urls
    sleep 1  # replayed on the standby
    cluster_ctl "$primary" -m immediate -w stop
    stopped=$(now)
    cluster_ctl "$standby" -w promote
    timing=$(python3 - "$token" "$stopped" <<'PY'
import http.client, json, sys, time
token, stopped = sys.argv[1], float(sys.argv[2])

def status(method, path, body=None):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", 18080, timeout=5)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        return response.status, text
    except OSError:
        return None, ""

first_page = first_write = None
codes = set()
while first_page is None or first_write is None:
    if time.time() - stopped > 60:
        sys.exit(f"no failover within 60 s: {codes}")
    if first_page is None:
        code, text = status("GET", "/sitemap-1.xml")
        codes.add(code)
        if code == 200 and "before" in text:
            first_page = time.time() - stopped
    if first_write is None:
        code, _ = status("PUT", "/api/v1/urls", json.dumps([{"loc": "https://www.example.com/after"}]))
        codes.add(code)
        if code == 200:
            first_write = time.time() - stopped
    time.sleep(0.02)
print(f"{first_page:.3f} {first_write:.3f} {sorted(c for c in codes if c)}")
PY
    )
    echo "trial $trial: stop → first page 200 / first write accepted: $timing"
    results+=("$timing")
    kill -TERM "$serve_pid"; wait "$serve_pid" || true; serve_pid=
    cluster_ctl "$standby" -m immediate -w stop
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [line.split()[:2] for line in sys.stdin if line.strip()]
pages = [float(r[0]) for r in rows]; writes = [float(r[1]) for r in rows]
print(f"median over {len(rows)} trials: first page 200 after {statistics.median(pages):.2f} s "
      f"(max {max(pages):.2f}), first write accepted after {statistics.median(writes):.2f} s "
      f"(max {max(writes):.2f})")'
