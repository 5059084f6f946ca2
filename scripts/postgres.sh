#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, from Debian's `postgresql` package
# (installed here when missing).
#   scripts/postgres.sh start DIR   creates a cluster in DIR on a free port, starts it and
#                                   prints its admin address (postgres://agent@127.0.0.1:PORT/postgres)
#   scripts/postgres.sh stop DIR    stops it and removes DIR
set -euo pipefail
action="${1:?start or stop}"
dir="${2:?cluster directory}"

bin_dir() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

# initdb refuses to run as root: the cluster belongs to the package's `postgres` user then.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$action" in
start)
    if [ -z "$(bin_dir)" ]; then
        "$(dirname "$0")/apt-install.sh" postgresql
    fi
    bin="$(bin_dir)"
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U agent --no-sync >/dev/null
    # Room for several hosts' pools at once (the multi-host tests run three); fsync off:
    # the cluster is thrown away, and durability across power loss is not what is tested.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
        "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=500 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start >/dev/null
    echo "postgres://agent@127.0.0.1:$port/postgres"
    ;;
stop)
    bin="$(bin_dir)"
    if [ -d "$dir/data" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "postgres.sh: unknown action $action" >&2
    exit 2
    ;;
esac
