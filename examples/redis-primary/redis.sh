#!/bin/sh
# For the walkthrough: ./redis.sh start ID [keep] | kill ID | status
#   start ID       runs node ID's redis-server (from nodes.conf) in the background with
#                  redis.conf, files in redis/ID/; empty unless "keep" (then it loads
#                  its RDB file, redis/ID/dump.rdb). It comes up read-only, a replica
#                  of no one (redis.conf), until bully promotes or repoints it: also
#                  what to run by hand to see a Redis restart under a living bully
#   kill ID        kill -9 of that redis-server, by the PID in its pidfile
#   status         role, primary and key count of every Redis
set -eu
cd -- "$(dirname -- "$0")"
BULLY_NODE_ID=${2:-0}
. ./common.sh

case ${1:-} in
start)
    # shellcheck disable=SC2046 # "host port" splits on purpose
    set -- $(redis_of "$BULLY_NODE_ID") "${3:-}"
    dir="redis/$BULLY_NODE_ID"
    [ "$3" = keep ] || rm -rf "$dir"
    mkdir -p "$dir"
    rm -f "$dir/redis.pid" # a killed Redis leaves its pidfile behind
    {
        if [ -n "${REDISCLI_AUTH:-}" ]; then
            printf 'requirepass "%s"\nmasterauth "%s"\n' "$REDISCLI_AUTH" "$REDISCLI_AUTH"
        fi
        echo "include $PWD/redis.conf"
    } | redis-server - --bind "$1" --port "$2" --dir "$dir" --daemonize yes \
        --pidfile "$PWD/$dir/redis.pid" --logfile "$PWD/$dir/redis.log"
    echo "redis-server for node $BULLY_NODE_ID on $1:$2 (log: $dir/redis.log)"
    ;;
kill)
    pid=$(cat "redis/$BULLY_NODE_ID/redis.pid")
    kill -9 "$pid"
    echo "killed redis-server of node $BULLY_NODE_ID (pid $pid)"
    ;;
status)
    for id in $all_ids; do
        if probe "$id"; then
            if [ "$role" = slave ] && no_primary "$mhost" "$mport"; then
                role="replica of no one yet (as redis.conf starts it; bully promotes or repoints it)"
                link=""
            fi
            printf 'node %s: %s%s keys=%s epoch=%s offset=%s\n' "$id" "$role" \
                "${link:+ of $mport link=$link}" "$keys" "$epoch" "$offset"
        else
            echo "node $id: $probe_error"
        fi
    done
    ;;
*)
    echo "usage: $0 start ID [keep] | kill ID | status" >&2
    exit 2
    ;;
esac
