#!/usr/bin/env bash
# Placement end to end, as deployed: `sitemapd serve` at its defaults on a
# fresh database, then bulk changes in plain SQL, each of all ROWS
# rows in one transaction, one after the other:
#   new:     a COPY of ROWS new rows (three sections, as bulk_rows.sql
#            writes them);
#   update:  every row's lastmod moved on a day;
#   rename:  every row's loc changed (each is another URL: off its page,
#            placed again);
#   delete:  every row deleted.
# and, only when --shapes names it, before the rename:
#   rename-floor: every row's lastmod moved on, and a removal written for
#            each that names no placed URL. What any rename costs at
#            least, however it is placed: the pass reads each changed row
#            (as an update's), and a fold takes the removal that carries
#            its old loc, here with no run to rewrite and no entry to feed.
# Each is timed from its commit until the folds have placed it (the fold
# state's snapshot sees the transaction), looked at every 0.05 s, and checked
# against the summaries' count; then, as `CHANGE+feed`, until the feed has
# it too (no kept entry is left to write out), which each change waits for
# before the next is committed. Prints each change's times, rows/s and the
# server's peak RSS (VmHWM) over all of them, then the medians; the builds
# given alternate within each run.
#
#   scripts/bench_placement.sh [--rows N] [--runs N] [--shapes 'new delete'] BINARY...
#
# --shapes runs only the changes it names (new always runs: the others
# change its rows).
#
# Needs psql and curl, and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); listens on 127.0.0.1:18780-18781;
# creates and drops sitemapd_bench_placement.
set -euo pipefail

rows=1000000
runs=3
shapes="new update rename delete"
while (($#)); do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --shapes) shapes="new $2"; shift 2 ;;
        *) break ;;
    esac
done
(($# >= 1)) || { echo "usage: $0 [--rows N] [--runs N] [--shapes 'new delete'] BINARY..." >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
db=sitemapd_bench_placement
work=$(mktemp -d)
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
}
trap cleanup EXIT
export DATABASE_URL=$pg_base/$db SITEMAPD_BASE_URL=http://localhost:8080/ \
    SITEMAPD_LISTEN=127.0.0.1:18780 SITEMAPD_METRICS_LISTEN=127.0.0.1:18781
unset RUST_LOG

psql -qAt "$pg_base/postgres" -v rows="$rows" -f "$here/scripts/bulk_rows.sql" >"$work/rows.tsv"
now() { date +%s.%N; }
listed() { psql -qAt "$DATABASE_URL" -c "SELECT coalesce(sum(url_count), 0) FROM sitemap_pages"; }
# Runs psql's input as one transaction; prints its xid once committed.
commit() {
    (echo "BEGIN;"; cat; echo "SELECT pg_current_xact_id(); COMMIT;") |
        psql -qAt -v ON_ERROR_STOP=1 "$DATABASE_URL" | grep -E '^[0-9]+$'
}
# Waits, on one connection, until CONDITION (SQL) holds, looking every
# 0.05 s. A psql started every 0.1 s instead took a seventh of the two
# cores' time from the folds it was timing. It commits after each look, so
# that it holds no snapshot while it waits: one held from the commit on
# kept every tuple the folds deleted meanwhile from being pruned or
# vacuumed, as no one watching a deployment does.
wait_until() {
    psql -qAt -v ON_ERROR_STOP=1 "$DATABASE_URL" -c \
        "DO \$\$ BEGIN WHILE NOT ($1) LOOP PERFORM pg_sleep(0.05); COMMIT; END LOOP; END \$\$"
}
# Prints the seconds from now until the folds have placed transaction $1.
placed_after() {
    local since
    since=$(now)
    wait_until "(SELECT pg_visible_in_snapshot('$1'::xid8, folded_through) FROM sitemap_fold_state)"
    echo "$(now) - $since" | bc
}
# Waits until no kept feed entry is left to write out.
written_out() {
    wait_until "NOT EXISTS (SELECT 1 FROM sitemap_change_stash)"
}
# CHANGE, the rows listed once it is placed, the statements.
change() {
    local name=$1 expect=$2 xid since seconds
    [[ " $shapes " == *" $name "* ]] || { cat >/dev/null; return; }
    xid=$(commit)
    since=$(now)
    seconds=$(placed_after "$xid")
    (($(listed) == expect)) || { echo "$name: $(listed) rows listed, not $expect" >&2; exit 1; }
    echo "$binary $name $seconds" | tee -a "$work/runs"
    written_out
    echo "$binary $name+feed $(echo "$(now) - $since" | bc)" | tee -a "$work/runs"
}

for ((run = 1; run <= runs; run++)); do
    for binary in "$@"; do
        psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
        "$binary" migrate >/dev/null 2>&1
        "$binary" serve >"$work/serve.log" 2>&1 &
        server=$!
        until curl -sf -o /dev/null http://127.0.0.1:18780/healthz; do sleep 0.05; done
        change new "$rows" <<<"\\copy sitemap_urls (section, loc, lastmod) FROM '$work/rows.tsv'"
        change update "$rows" <<<"UPDATE sitemap_urls SET lastmod = lastmod + interval '1 day';"
        change rename-floor "$rows" <<<"UPDATE sitemap_urls SET lastmod = lastmod + interval '1 day';
            INSERT INTO sitemap_removals SELECT id, site, loc || '-gone' FROM sitemap_urls;"
        change rename "$rows" <<<"UPDATE sitemap_urls SET loc = loc || '-moved';"
        change delete 0 <<<"DELETE FROM sitemap_urls;"
        echo "$binary peak $(awk '/VmHWM/ {print $2}' "/proc/$server/status")" | tee -a "$work/runs"
        kill "$server" && wait "$server" 2>/dev/null || true
        server=
    done
done
python3 - "$work/runs" "$rows" <<'PY'
import statistics, sys
rows = int(sys.argv[2])
times, peaks = {}, {}
for line in open(sys.argv[1]):
    binary, what, value = line.split()
    if what == "peak":
        peaks[binary] = max(peaks.get(binary, 0), int(value))
    else:
        times.setdefault(binary, {}).setdefault(what, []).append(float(value))
for binary, by in times.items():
    print(f"{binary}: peak RSS {peaks[binary] / 1024:.0f} MiB")
    print(f"| {rows:,} rows | placed after the commit (median) | rows/s | runs |")
    print("|---|---|---|---|")
    for what, seconds in by.items():
        median = statistics.median(seconds)
        each = ", ".join(f"{s:.1f}" for s in seconds)
        print(f"| {what} | {median:.1f} s | {rows / median:,.0f} | {each} s |")
PY
