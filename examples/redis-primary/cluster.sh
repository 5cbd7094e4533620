#!/bin/sh
# The whole walkthrough in one go: ./cluster.sh start | kill ID | restart ID [keep] | stop
#   start       certificates (if missing), the three Redis servers (redis.sh start ID),
#               one keeper per node (`bully run --config nodeID.toml`: it runs
#               fence.sh when the node's office ends on its host), the three bully
#               nodes and HAProxy (haproxy.cfg), each in the background; their PIDs
#               go to run/*.pid and their logs to run/*.log
#   kill ID     kill -9 of bully node ID and of its Redis (its keeper lives on, as a
#               host's supervisor would, and serves the node again once it restarts)
#   restart ID  starts Redis ID (empty, or from its RDB file with "keep"), node ID and,
#               if it is not running, its keeper
#   stop        kills exactly what start and restart started, by those PIDs (bully
#               nodes first, with SIGTERM so the coordinator runs on_demoted, then the
#               keepers, with SIGTERM: each runs its fence if its node still led)
# The bully binary: $BULLY, else `bully` on the PATH, else ../../target/debug/bully.
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

started() { [ -f "run/$1.pid" ] && kill -0 "$(cat "run/$1.pid")" 2>/dev/null; }

# start_redis ID [keep]: redis.sh start, then its PID (once the pidfile exists).
start_redis() {
    ./redis.sh start "$1" ${2:+"$2"}
    tries=0
    until [ -s "redis/$1/redis.pid" ] || [ $tries -ge 50 ]; do sleep 0.1; tries=$((tries + 1)); done
    [ -s "redis/$1/redis.pid" ] || {
        echo "Redis $1 did not start (port taken?): see redis/$1/redis.log; ./cluster.sh stop stops the rest" >&2
        exit 1
    }
    cp "redis/$1/redis.pid" "run/redis$1.pid"
}

# start_node ID: bully node ID in the background, appending to run/nodeID.log.
start_node() {
    started "node$1" && { echo "node $1 already runs (run/node$1.pid)" >&2; exit 1; }
    "$bully" node --config "node$1.toml" >> "run/node$1.log" 2>&1 &
    echo $! > "run/node$1.pid"
}

# start_keeper ID: node ID's keeper (`bully run` with no job: it only runs the
# [fence] command, fence.sh) in the background, appending to run/keeperID.log, unless
# it already runs. It finds the node by the socket in its data_dir and waits for it.
start_keeper() {
    started "keeper$1" && return 0
    "$bully" run --config "node$1.toml" >> "run/keeper$1.log" 2>&1 &
    echo $! > "run/keeper$1.pid"
}

case ${1:-} in
start)
    for tool in redis-server redis-cli haproxy; do
        command -v "$tool" >/dev/null || { echo "$tool is needed (apt-get install ${tool%-*})" >&2; exit 2; }
    done
    [ -x "$bully" ] || command -v "$bully" >/dev/null || { echo "no bully binary at $bully: cargo build, or set BULLY" >&2; exit 2; }
    mkdir -p run data
    [ -f certs/ca.pem ] || "$bully" certs init --dir certs --nodes 1,2,3
    for id in 1 2 3; do
        start_redis "$id" ${KEEP:+keep}
    done
    for id in 1 2 3; do
        start_keeper "$id" # first, so each node's first office is already fenced
        start_node "$id"
    done
    haproxy -f haproxy.cfg -D -p "$here/run/haproxy.pid"
    echo "started: Redis 6381-6383, bully nodes 1-3 (HTTP 8301-8303) with their keepers, HAProxy on 127.0.0.1:6380"
    echo "logs: run/node*.log, run/keeper*.log, redis/*/redis.log; stop with ./cluster.sh stop"
    ;;
kill)
    for name in "node${2:?which node}" "redis$2"; do
        pid=$(cat "run/$name.pid") && kill -9 "$pid" && echo "killed $name (pid $pid)"
        rm -f "run/$name.pid"
    done
    ;;
restart)
    start_redis "${2:?which node}" ${3:+"$3"}
    start_keeper "$2"
    start_node "$2"
    echo "started Redis $2${3:+ from its RDB file} and bully node $2 (keeper: run/keeper$2.pid)"
    ;;
stop)
    for name in node3 node2 node1 keeper3 keeper2 keeper1 haproxy redis1 redis2 redis3; do
        [ -f "run/$name.pid" ] || continue
        pid=$(cat "run/$name.pid")
        case $name in node* | keeper*) signal=TERM ;; *) signal=KILL ;; esac
        if kill -s "$signal" "$pid" 2>/dev/null; then
            echo "stopped $name (pid $pid)"
        fi
        rm -f "run/$name.pid"
    done
    ;;
*)
    echo "usage: $0 start | kill ID | restart ID [keep] | stop" >&2
    echo "  (KEEP=1 $0 start starts every Redis from its RDB file)" >&2
    exit 2
    ;;
esac
