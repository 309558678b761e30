#!/usr/bin/env bash
# The feed's writer alone, builds side by side: ENTRIES feed entries kept
# as a large fold keeps them (rows of 10,000 locs of one site), written out
# to sitemap_changes by each build's `fold` command, which has nothing to
# fold and then writes the kept entries out as the service's writer does;
# timed as the command reports the write-out. Each run fills the kept
# entries again and alternates between the builds; prints each run's
# seconds, the medians, and each build's rate against the first build's.
# Checks every run: all entries written, their seqs without a gap, in the
# order of the locs.
#
#   scripts/bench_feed_writeout.sh [--entries N] [--runs N] BINARY...
#
# Needs psql and PostgreSQL at $PG_BASE (default
# postgres://postgres@127.0.0.1:5432); creates and drops
# sitemapd_feed_writeout_1, _2, ...
set -euo pipefail

entries=1000000
runs=3
while (($#)); do
    case "$1" in
        --entries) entries=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
(($# >= 1)) || {
    echo "usage: $0 [--entries N] [--runs N] BINARY..." >&2
    exit 2
}
binaries=("$@")
pg_base=${PG_BASE:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
cleanup() {
    for i in "${!binaries[@]}"; do
        psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS sitemapd_feed_writeout_$((i + 1))" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

for i in "${!binaries[@]}"; do
    db=sitemapd_feed_writeout_$((i + 1))
    psql -q "$pg_base/postgres" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
    DATABASE_URL="$pg_base/$db" SITEMAPD_BASE_URL=https://www.example.com/ \
        "${binaries[$i]}" migrate >"$work/migrate-$i.log" 2>&1 || {
        cat "$work/migrate-$i.log" >&2
        exit 1
    }
done

fill() {
    psql -qX "$pg_base/$1" -v entries="$entries" <<'SQL'
TRUNCATE sitemap_changes, sitemap_change_stash;
INSERT INTO sitemap_change_stash (site, change, committed_at, locs)
SELECT 'default', 'added', now(),
       array_agg('https://www.example.com/catalogue/products/item-' || g || '.html' ORDER BY g)
FROM generate_series(1, :entries) g GROUP BY (g - 1) / 10000 ORDER BY (g - 1) / 10000;
CHECKPOINT;
SQL
}

# Build $1's write-out of database $2's kept entries: prints its seconds.
write_out() {
    DATABASE_URL="$pg_base/$2" SITEMAPD_BASE_URL=https://www.example.com/ \
        "${binaries[$1]}" fold 2>/dev/null |
        awk '$1 == "wrote" { print $(NF - 1) }'
}

check() {
    local got
    got=$(psql -qAtX "$pg_base/$1" -c "
        SELECT count(*) = $entries
           AND max(seq) - min(seq) + 1 = count(*)
           AND bool_and(loc = 'https://www.example.com/catalogue/products/item-'
                              || (seq - first + 1) || '.html')
        FROM sitemap_changes, (SELECT min(seq) AS first FROM sitemap_changes) f")
    [[ $got == t ]] || {
        echo "build $(($2 + 1)): the feed is not the $entries entries in order" >&2
        exit 1
    }
}

echo "entries: $entries; $runs runs"
for ((run = 1; run <= runs; run++)); do
    for i in "${!binaries[@]}"; do
        db=sitemapd_feed_writeout_$((i + 1))
        fill "$db"
        seconds=$(write_out "$i" "$db")
        check "$db" "$i"
        echo "run $run build $((i + 1)) $seconds" | tee -a "$work/times"
    done
done

python3 - "$work/times" "$entries" "${binaries[@]}" <<'EOF'
import statistics, sys
times, entries, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
by = {}
for line in open(times):
    _, _, _, build, seconds = line.split()
    by.setdefault(int(build), []).append(float(seconds))
base = statistics.median(by[1])
for build, binary in enumerate(binaries, 1):
    median = statistics.median(by[build])
    print(f"build {build} ({binary}): median {median:.2f} s, "
          f"{median / entries * 1e6:.2f} µs an entry, {base / median:.2f}× build 1")
EOF
