#!/bin/sh
# For the walkthrough: ./redis.sh start ID | kill ID | status
#   start ID  runs node ID's redis-server (from nodes.conf) in the background, empty and
#             without persistence, files in redis/ID/
#   kill ID   kill -9 of that redis-server, by the PID in its pidfile
#   status    role, primary and key count of every Redis
set -eu
cd -- "$(dirname -- "$0")"
BULLY_NODE_ID=${2:-0}
. ./common.sh

case ${1:-} in
start)
    set -- $(redis_of "$BULLY_NODE_ID")
    dir="redis/$BULLY_NODE_ID"
    rm -rf "$dir" && mkdir -p "$dir"
    redis-server --bind "$1" --port "$2" --dir "$dir" --daemonize yes \
        --pidfile "$PWD/$dir/redis.pid" --logfile "$PWD/$dir/redis.log" \
        --save "" --appendonly no --repl-diskless-sync-delay 0
    echo "redis-server for node $BULLY_NODE_ID on $1:$2 (log: $dir/redis.log)"
    ;;
kill)
    pid=$(cat "redis/$BULLY_NODE_ID/redis.pid")
    kill -9 "$pid"
    echo "killed redis-server of node $BULLY_NODE_ID (pid $pid)"
    ;;
status)
    for id in $(awk '$1 !~ /^#/ && NF >= 3 { print $1 }' "$nodes_file"); do
        if info=$(rcli "$id" INFO replication 2>/dev/null); then
            keys=$(rcli "$id" DBSIZE)
            printf 'node %s: %s %s keys=%s\n' "$id" "$(info_field role)" \
                "$(info_field master_port)$(info_field master_link_status | sed 's/^/ link=/')" "$keys"
        else
            echo "node $id: down"
        fi
    done
    ;;
*)
    echo "usage: $0 start ID | kill ID | status" >&2
    exit 2
    ;;
esac
