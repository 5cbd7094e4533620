#!/bin/sh
# The walkthrough in one go: ./cluster.sh start | status | kill ID | restart ID | stop
#   start       certificates (if missing), one keeper per node (`bully run --config
#               nodeID.toml`: it stops the node's server when the office ends on its
#               host), the three bully nodes (each keeps its PostgreSQL server: the first
#               coordinator runs initdb, the others clone it) and HAProxy (haproxy.cfg),
#               each in the background; PIDs go to run/*.pid, logs to run/*.log and each
#               server's to data/nodeID/postgres.log
#   status      the cluster as bully sees it, with each server's role, timeline, WAL
#   kill ID     kill -9 of bully node ID, its keeper and its server: the host is lost
#   restart ID  starts keeper ID and node ID again (the server rejoins by pg_rewind)
#   stop        stops exactly what start and restart started, by those PIDs (bully
#               nodes first, with SIGTERM, then the keepers, which stop the servers of
#               the nodes that still led, then HAProxy), then any server still running
# The servers' data: /var/tmp/bully-example/pg (see node*.toml). The bully binary:
# $BULLY, else `bully` on the PATH, else ../../target/debug/bully.
set -eu
cd -- "$(dirname -- "$0")"
here=$PWD
if [ -n "${BULLY:-}" ]; then
    bully=$BULLY
elif command -v bully >/dev/null 2>&1; then
    bully=bully
else
    bully=$here/../../target/debug/bully
fi
ids="1 2 3"
pg_root=/var/tmp/bully-example/pg

started() { [ -f "run/$1.pid" ] && kill -0 "$(cat "run/$1.pid")" 2>/dev/null; }

# start_node ID: bully node ID in the background, appending to run/nodeID.log.
start_node() {
    started "node$1" && { echo "node $1 already runs (run/node$1.pid)" >&2; exit 1; }
    "$bully" node --config "node$1.toml" >> "run/node$1.log" 2>&1 &
    echo $! > "run/node$1.pid"
}

# start_keeper ID: node ID's keeper in the background, appending to run/keeperID.log,
# unless it already runs. It finds the node by the socket in its data_dir.
start_keeper() {
    started "keeper$1" && return 0
    "$bully" run --config "node$1.toml" >> "run/keeper$1.log" 2>&1 &
    echo $! > "run/keeper$1.pid"
}

# server_pid ID: the postmaster of server ID, if one runs.
server_pid() {
    pid=$(head -n 1 "$pg_root/node$1/postmaster.pid" 2>/dev/null) || return 1
    kill -0 "$pid" 2>/dev/null && echo "$pid"
}

case ${1:-} in
start)
    command -v haproxy >/dev/null || { echo "haproxy is needed (apt-get install haproxy)" >&2; exit 2; }
    [ -x "$bully" ] || command -v "$bully" >/dev/null || { echo "no bully binary at $bully: cargo build, or set BULLY" >&2; exit 2; }
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        echo "running as root: PostgreSQL needs a user to run as (apt-get install postgresql-15 creates postgres)" >&2
        exit 2
    fi
    mkdir -p run data "$pg_root"
    [ "$(id -u)" = 0 ] && chown postgres "$pg_root"
    [ -f certs/ca.pem ] || "$bully" certs init --dir certs --nodes 1,2,3
    for id in $ids; do
        start_keeper "$id" # first, so each node's first office is already fenced
        start_node "$id"
    done
    haproxy -f haproxy.cfg -D -p "$here/run/haproxy.pid"
    echo "started: bully nodes 1-3 (HTTP 8401-8403) keeping PostgreSQL 5441-5443, their keepers,"
    echo "HAProxy: writes on 127.0.0.1:5440, reads on 127.0.0.1:5450; stop with ./cluster.sh stop"
    ;;
status)
    "$bully" status --cluster --config node1.toml
    ;;
kill)
    for name in "node${2:?which node}" "keeper$2"; do
        pid=$(cat "run/$name.pid") && kill -9 "$pid" && echo "killed $name (pid $pid)"
        rm -f "run/$name.pid"
    done
    if pid=$(server_pid "$2"); then
        # PostgreSQL's children lead sessions of their own: each is killed by its PID.
        children=$(ps -o pid= --ppid "$pid" || true)
        kill -9 "$pid" $children && echo "killed server $2 (postmaster $pid and its children)"
    fi
    ;;
restart)
    start_keeper "${2:?which node}"
    start_node "$2"
    echo "started keeper $2 and bully node $2; its server rejoins as a standby"
    ;;
stop)
    for name in node3 node2 node1 keeper3 keeper2 keeper1 haproxy; do
        [ -f "run/$name.pid" ] || continue
        pid=$(cat "run/$name.pid")
        if kill -s TERM "$pid" 2>/dev/null; then
            echo "stopped $name (pid $pid)"
        fi
        rm -f "run/$name.pid"
    done
    # A manager that was acting as its node stopped may have started its server
    # a moment before: let the nodes finish, then stop every server still running.
    sleep 1
    for id in $ids; do
        if pid=$(server_pid "$id"); then
            kill -s INT "$pid" && echo "stopped server $id (fast shutdown)"
        fi
    done
    ;;
*)
    echo "usage: $0 start | status | kill ID | restart ID | stop" >&2
    exit 2
    ;;
esac
