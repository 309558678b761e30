#!/usr/bin/env bash
# Import speed, side by side: each given sitemapd binary imports the same
# generated JSON Lines file into a fresh database (new rows), then imports it
# again (all unchanged); runs alternate between binaries, and the medians of
# wall time and peak RSS are printed per binary.
#
#   scripts/bench_import.sh [--lines N] [--runs N] BINARY [BINARY...]
#
# e.g. compare a build of an older commit with the current one:
#   scripts/bench_import.sh --lines 1000000 /tmp/sitemapd-before target/release/sitemapd
#
# Needs python3, GNU time (/usr/bin/time) and PostgreSQL at $PG_BASE
# (default postgres://postgres@127.0.0.1:5432); creates and drops databases
# named sitemapd_bench_import_<n>.
set -euo pipefail

lines=1000000
runs=3
while [[ $# -gt 0 ]]; do
    case $1 in
        --lines) lines=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ $# -ge 1 ]] || { echo "usage: $0 [--lines N] [--runs N] BINARY [BINARY...]" >&2; exit 2; }
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 "$(dirname "$0")/gen_jsonl.py" "$lines" "$work/urls.jsonl"

timed() { # database, binary -> "seconds KiB"
    DATABASE_URL="$pg_base/$1" /usr/bin/time -o "$work/time" -f "%e %M" \
        "$2" import "$work/urls.jsonl" --format jsonl >/dev/null 2>&1
    cat "$work/time"
}

for ((run = 1; run <= runs; run++)); do
    n=0
    for binary in "$@"; do
        n=$((n + 1))
        db=sitemapd_bench_import_$n
        PGOPTIONS="-c client_min_messages=warning" psql "$pg_base/postgres" -qc "DROP DATABASE IF EXISTS $db"
        echo "$n $(timed "$db" "$binary") $(timed "$db" "$binary")" >>"$work/results"
        psql "$pg_base/postgres" -qc "DROP DATABASE $db"
    done
done

n=0
for binary in "$@"; do
    n=$((n + 1))
    awk -v n="$n" -v lines="$lines" -v name="$binary" '
        $1 == n { fresh[++k] = $2; fresh_rss[k] = $3; again[k] = $4 }
        function median(a, len,   i, j, t) {
            for (i = 1; i <= len; i++) for (j = i + 1; j <= len; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return len % 2 ? a[(len + 1) / 2] : (a[len / 2] + a[len / 2 + 1]) / 2
        }
        END {
            f = median(fresh, k); a = median(again, k); r = median(fresh_rss, k)
            printf "%s: new rows %.1f s (%d records/s), again %.1f s (%d records/s), peak RSS %.0f MiB\n",
                name, f, lines / f, a, lines / a, r / 1024
        }' "$work/results"
done
