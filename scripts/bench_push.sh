#!/usr/bin/env bash
# Whether pushing to IndexNow slows writes or their visibility: the
# visibility example (writers at --rate commits/s, a probe timing commit ->
# served) against `sitemapd serve`, once without a key and once pushing
# every change to a loopback receiver, alternating over runs.
#
#   scripts/bench_push.sh [--rate N] [--seconds N] [--runs N] BINARY EXAMPLE
#
# BINARY is target/release/sitemapd, EXAMPLE target/release/examples/visibility.
# Needs python3, psql and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops sitemapd_bench_push.
set -euo pipefail

rate=1000
seconds=60
runs=2
while [[ $# -gt 0 ]]; do
    case $1 in
        --rate) rate=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -eq 2 ]] || { echo "usage: $0 [--rate N] [--seconds N] [--runs N] BINARY EXAMPLE" >&2; exit 2; }
binary=$1
example=$2
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_push
url="$pg_base/$db"
base_url=https://www.example.com/
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The receiver: answers every POST 200 and counts the URLs it was sent.
cat > "$work/receiver.py" <<'PY'
import http.server, json, sys
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(sys.argv[2], "a") as log:
            log.write(f"{len(json.loads(body)['urlList'])}\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
PY
python3 "$work/receiver.py" 18765 "$work/received" &
pids+=($!)

for run in $(seq 1 "$runs"); do
    modes="off on"
    (( run % 2 == 0 )) && modes="on off"
    for mode in $modes; do
        psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
        : > "$work/received"
        env=(DATABASE_URL="$url" SITEMAPD_BASE_URL="$base_url" SITEMAPD_LISTEN=127.0.0.1:18080 RUST_LOG=warn)
        [[ $mode == on ]] && env+=(SITEMAPD_INDEXNOW_KEY=bench-push-key SITEMAPD_INDEXNOW_ENDPOINT=http://127.0.0.1:18765/indexnow)
        env "${env[@]}" "$binary" serve &
        server=$!
        until curl -sf http://127.0.0.1:18080/healthz >/dev/null; do sleep 0.2; done
        result=$("$example" --database-url "$url" --server http://127.0.0.1:18080 \
            --base-url "$base_url" --rate "$rate" --seconds "$seconds" | tail -1)
        sleep 7  # the last batch's delay
        kill "$server"; wait "$server" || true
        sent=$(awk '{n += $1} END {print n + 0}' "$work/received")
        echo "run $run, IndexNow $mode: $result; URLs pushed: $sent"
    done
done
psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db"
