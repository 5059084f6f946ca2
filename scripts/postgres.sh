#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, from Debian's `postgresql` package
# (installed here when missing). It takes TLS connections only (over TCP), with a
# certificate from a CA made here, so the whole PostgreSQL pass runs as a deployment
# should: encrypted, the server's certificate checked (sslmode=verify-full).
#   scripts/postgres.sh start DIR   creates a cluster in DIR on a free port, starts it and
#                                   prints its admin address
#                                   (postgres://agent@127.0.0.1:PORT/postgres?sslmode=verify-full&sslrootcert=DIR/ca.crt)
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
    if ! command -v openssl >/dev/null 2>&1; then
        "$(dirname "$0")/apt-install.sh" openssl
    fi
    bin="$(bin_dir)"
    mkdir -p "$dir"
    # A CA, and the server's certificate for 127.0.0.1 signed by it (P-256: quick to make).
    ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    openssl req -x509 $ec -days 3 -subj "/CN=agent-host test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req $ec -subj "/CN=127.0.0.1" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
        > "$dir/server.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3 \
        -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
    chmod 600 "$dir/server.key"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir" "$dir/server.key" "$dir/server.crt"; fi
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U agent --no-sync >/dev/null
    # Over TCP, TLS or nothing; the local socket (the scripts' own) stays open.
    printf 'local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n' \
        > "$dir/data/pg_hba.conf"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir/data/pg_hba.conf"; fi
    # Room for several hosts' pools at once (the multi-host tests run three); fsync off:
    # the cluster is thrown away, and durability across power loss is not what is tested.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o \
        "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=500 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key" \
        start >/dev/null
    echo "postgres://agent@127.0.0.1:$port/postgres?sslmode=verify-full&sslrootcert=$dir/ca.crt"
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
