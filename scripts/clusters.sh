# PostgreSQL clusters of a benchmark's own, on loopback ports, sourced by
# bench_failover.sh and bench_standby_reads.sh: a primary (initdb) and hot
# standbys of it (pg_basebackup -R), in a directory `clusters_stop_all`
# stops and removes. Run as root, the server's commands run as `postgres`.

cluster_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
cluster_user=()
((EUID == 0)) && cluster_user=(runuser -u postgres --)
cluster_work=$(mktemp -d)
chmod 755 "$cluster_work"

# Runs one of the server's commands (pg_ctl, initdb, …) as its user.
cluster_run() {
    local command=$1
    shift
    "${cluster_user[@]}" "$cluster_bin/$command" "$@"
}

# Starts the cluster NAME on PORT; any more arguments are server settings
# (-c name=value …).
cluster_start() {
    local dir=$cluster_work/$1 port=$2
    shift 2
    cluster_run pg_ctl -D "$dir/data" -l "$dir/log" -w \
        -o "-c port=$port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off $*" \
        start >/dev/null
}

# A new primary NAME on PORT, started.
cluster_primary() {
    local name=$1 port=$2
    shift 2
    mkdir -p "$cluster_work/$name"
    chown postgres: "$cluster_work/$name" 2>/dev/null || true
    cluster_run initdb -D "$cluster_work/$name/data" -U postgres -A trust --no-sync >/dev/null
    cluster_start "$name" "$port" "$@"
}

# A hot standby NAME on PORT of the primary on PRIMARY_PORT, started.
cluster_standby() {
    local name=$1 port=$2 primary_port=$3
    shift 3
    mkdir -p "$cluster_work/$name"
    chown postgres: "$cluster_work/$name" 2>/dev/null || true
    cluster_run pg_basebackup -h 127.0.0.1 -p "$primary_port" -U postgres \
        -D "$cluster_work/$name/data" -R -X stream --checkpoint=fast --no-sync
    cluster_start "$name" "$port" "$@"
}

# pg_ctl on the cluster NAME: `cluster_ctl NAME -m immediate -w stop`.
cluster_ctl() {
    local name=$1
    shift
    cluster_run pg_ctl -D "$cluster_work/$name/data" "$@" >/dev/null
}

clusters_stop_all() {
    local data
    for data in "$cluster_work"/*/data; do
        [[ -d $data ]] && cluster_run pg_ctl -D "$data" -m immediate stop >/dev/null 2>&1
    done
    rm -rf "$cluster_work"
}
