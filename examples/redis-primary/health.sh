#!/bin/sh
# The [health] check: exit 0 when this node's Redis may become the primary.
#
# - A replica is eligible once it has caught up: link to its primary up and at most
#   $MAX_LAG_BYTES (default 0) behind the primary's replication offset. Raising it lets a
#   replica under constant writes qualify sooner, at the price of losing up to that many
#   bytes of writes when it then takes over from a live primary (preempt = "always"). The check then remembers
#   the Redis run_id in $BULLY_DATA_DIR/redis-synced, so after the primary dies (link
#   down) this replica, which holds the data, stays eligible.
# - A primary is eligible while this node is the coordinator, or when this same Redis
#   process (same run_id) was synced before (or passed the first-start rule below).
# - A Redis that restarted (new run_id) as an empty primary is NOT eligible while any
#   other Redis is a primary that holds keys or has replicas: this node must first follow
#   the coordinator, let on-change.sh make its Redis a replica, and catch up.
#   Only when no other Redis holds data (first start of the cluster) may it lead as is.
# The run_id marker only ever vouches for the Redis process it names: a Redis that
# restarts gets a new run_id and must earn it again.
set -eu
. "$(dirname -- "$0")/common.sh"
MAX_LAG_BYTES=${MAX_LAG_BYTES:-0}

info=$(rcli "$BULLY_NODE_ID" INFO replication 2>&1) || { log "Redis unreachable: $info"; exit 1; }
case $info in *role:*) ;; *) log "Redis did not answer INFO: $info"; exit 1 ;; esac
role=$(info_field role)
run_id=$(info=$(rcli "$BULLY_NODE_ID" INFO server); info_field run_id)
marker="${BULLY_DATA_DIR:?}/redis-synced"

synced_before() { [ -f "$marker" ] && [ "$(cat "$marker")" = "$run_id" ]; }
mark_synced() { printf '%s\n' "$run_id" > "$marker.tmp" && mv "$marker.tmp" "$marker"; }

if [ "$role" = slave ]; then
    if [ "$(info_field master_link_status)" = up ]; then
        mine=$(info_field slave_repl_offset)
        host=$(info_field master_host)
        port=$(info_field master_port)
        theirs=$(info=$(redis-cli -h "$host" -p "$port" INFO replication) && info_field master_repl_offset) || theirs=
        if [ -n "$theirs" ] && [ $((theirs - mine)) -le "$MAX_LAG_BYTES" ]; then
            mark_synced
            exit 0
        fi
        log "catching up: offset $mine of ${theirs:-?}"
        exit 1
    fi
    # The primary is gone: this replica holds the data if it synced before.
    synced_before && exit 0
    log "replica that never finished a sync"
    exit 1
fi

if [ "$BULLY_ROLE" = coordinator ]; then
    mark_synced
    exit 0
fi
synced_before && exit 0

# An unsynced primary: fine only if no other Redis holds data (first start).
for id in $(other_ids); do
    peer=$(rcli "$id" INFO replication keyspace 2>/dev/null) || continue
    case $peer in *role:*) ;; *) continue ;; esac
    info=$peer
    if [ "$(info_field role)" = slave ] || [ "$(info_field connected_slaves)" != 0 ] \
        || printf '%s' "$peer" | grep -q '^db[0-9]*:keys='; then
        log "empty or stale Redis while node $id's Redis holds data: not eligible until it has caught up"
        exit 1
    fi
done
# First start: no Redis holds data, so this one is as good as any.
mark_synced
exit 0
