#!/bin/sh
# The whole walkthrough in one go: ./cluster.sh start | status | kill ID | restart ID | stop
#   start       certificates (if missing), the data directories (pg.sh init, if
#               missing), the three servers (pg.sh start ID: each a standby until bully
#               promotes one), one keeper per node (`bully run --config nodeID.toml`:
#               it runs fence.sh when the node's office ends on its host), the three
#               bully nodes and HAProxy (haproxy.cfg), each in the background; PIDs go
#               to run/*.pid, logs to run/*.log and pg/node*.log
#   status      who leads, and every server's role, WAL position and upstream
#   kill ID     kill -9 of bully node ID and of its server (its keeper lives on, as a
#               host's supervisor would, and serves the node again once it restarts)
#   restart ID  starts server ID (a standby; it rejoins by pg_rewind if it must), node
#               ID and, if it is not running, its keeper
#   stop        stops exactly what start and restart started, by those PIDs (bully
#               nodes first, with SIGTERM, then the keepers, then HAProxy), then the
#               servers (fast shutdown)
# As root the servers run as the postgres user (pg.sh); PG_ROOT (default ./pg) must be
# a directory that user can reach. The bully binary: $BULLY, else `bully` on the PATH,
# else ../../target/debug/bully.
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

started() { [ -f "run/$1.pid" ] && kill -0 "$(cat "run/$1.pid")" 2>/dev/null; }

# start_node ID: bully node ID in the background, appending to run/nodeID.log.
start_node() {
    started "node$1" && { echo "node $1 already runs (run/node$1.pid)" >&2; exit 1; }
    "$bully" node --config "node$1.toml" >> "run/node$1.log" 2>&1 &
    echo $! > "run/node$1.pid"
}

# start_keeper ID: node ID's keeper (`bully run` with no job: it only runs the [fence]
# command, fence.sh) in the background, appending to run/keeperID.log, unless it
# already runs. It finds the node by the socket in its data_dir and waits for it.
start_keeper() {
    started "keeper$1" && return 0
    "$bully" run --config "node$1.toml" >> "run/keeper$1.log" 2>&1 &
    echo $! > "run/keeper$1.pid"
}

case ${1:-} in
start)
    command -v haproxy >/dev/null || { echo "haproxy is needed (apt-get install haproxy)" >&2; exit 2; }
    [ -x "$bully" ] || command -v "$bully" >/dev/null || { echo "no bully binary at $bully: cargo build, or set BULLY" >&2; exit 2; }
    if [ "$(id -u)" = 0 ] && ! id "${PG_USER:-postgres}" >/dev/null 2>&1; then
        echo "running as root: PostgreSQL needs a user to run as (apt-get install postgresql-15 creates postgres; or set PG_USER)" >&2
        exit 2
    fi
    mkdir -p run data
    [ -f certs/ca.pem ] || "$bully" certs init --dir certs --nodes 1,2,3
    [ -d "${PG_ROOT:-pg}/node1" ] || ./pg.sh init
    for id in $ids; do
        ./pg.sh start "$id"
    done
    for id in $ids; do
        start_keeper "$id" # first, so each node's first office is already fenced
        start_node "$id"
    done
    haproxy -f haproxy.cfg -D -p "$here/run/haproxy.pid"
    echo "started: PostgreSQL 5441-5443, bully nodes 1-3 (HTTP 8401-8403) with their keepers, HAProxy on 127.0.0.1:5440"
    echo "logs: run/node*.log, run/keeper*.log, ${PG_ROOT:-pg}/node*.log; stop with ./cluster.sh stop"
    ;;
status)
    "$bully" leader --config node1.toml || true
    ./pg.sh status
    ;;
kill)
    pid=$(cat "run/node${2:?which node}.pid") && kill -9 "$pid" && echo "killed node$2 (pid $pid)"
    rm -f "run/node$2.pid"
    ./pg.sh kill "$2"
    ;;
restart)
    ./pg.sh start "${2:?which node}"
    start_keeper "$2"
    start_node "$2"
    echo "started server $2 (a standby) and bully node $2 (keeper: run/keeper$2.pid)"
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
    for id in $ids; do
        ./pg.sh stop "$id" && echo "stopped server $id"
    done
    ;;
*)
    echo "usage: $0 start | status | kill ID | restart ID | stop" >&2
    exit 2
    ;;
esac
