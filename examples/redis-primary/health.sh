#!/bin/sh
# The [health] check: exit 0 when this node's Redis may become the primary. Judged by
# the data, never by zero lag (a replica under writes is always a little behind):
#
# - A replica with its link up is eligible while it is at most $MAX_LAG_BYTES behind its
#   primary; the check then remembers the Redis run_id in $BULLY_DATA_DIR/redis-synced.
#   If it is elected while the old primary lives (a takeover, a paused or cut-off
#   coordinator), on-elected.sh fences the old primary and catches up the rest first.
# - A replica whose primary is gone stays eligible if this very Redis process (same
#   run_id) had caught up before: it holds the data. on-elected.sh refuses to promote
#   it if another Redis holds newer data (the most up-to-date replica must lead).
# - A replica still loading a full sync, or one that never caught up, is not eligible.
# - A primary is eligible while this node is the coordinator. Otherwise (a Redis that
#   restarted, with or without its RDB file, or a demoted primary not yet repointed)
#   only if every other Redis answers and none holds newer data (a higher bully:epoch,
#   then a higher replication offset): an empty Redis, or one restarted from an old
#   RDB file, never leads while another holds newer data, so it never becomes the
#   source of a resync; and after a full-cluster restart the Redis with the newest
#   RDB is eligible (ties: the highest node ID leads).
# - Fails closed: a Redis that cannot be reached or refuses our password (NOAUTH,
#   WRONGPASS) vouches for nothing, and a Redis older than 6.2 is refused.
set -eu
. "$(dirname -- "$0")/common.sh"

probe "$BULLY_NODE_ID" || { log "own Redis unreachable: $probe_error"; exit 1; }
check_version || exit 1
mine="$epoch $offset"
marker="${BULLY_DATA_DIR:?}/redis-synced"
synced_before() { [ -f "$marker" ] && [ "$(cat "$marker")" = "$run_id" ]; }
mark_synced() {
    synced_before && return 0
    printf '%s\n' "$run_id" > "$marker.tmp" && mv "$marker.tmp" "$marker"
}

if [ "$role" = slave ]; then
    if [ "$syncing" = 1 ]; then
        log "loading a full sync from its primary"
        exit 1
    fi
    if [ "$link" = up ]; then
        theirs=$(redis-cli -h "$mhost" -p "$mport" INFO replication 2>&1 \
            | sed -n 's/^master_repl_offset:\([0-9]*\).*/\1/p')
        case $theirs in
        '' | *[!0-9]*)
            log "primary $mhost:$mport does not answer its INFO"
            exit 1
            ;;
        esac
        lag=$((theirs - offset))
        if [ "$lag" -le "$MAX_LAG_BYTES" ]; then
            mark_synced
            exit 0
        fi
        log "catching up: $lag bytes behind (eligible within $MAX_LAG_BYTES)"
        exit 1
    fi
    synced_before && exit 0
    log "replica that never caught up, and its primary is gone"
    exit 1
fi

if [ "$BULLY_ROLE" = coordinator ]; then
    mark_synced
    exit 0
fi

# A primary that does not lead: eligible only with the newest data of all.
for id in $(other_ids); do
    probe "$id" || { log "cannot read node $id's Redis ($probe_error): not eligible"; exit 1; }
    if is_fresher "$epoch $offset" "$mine"; then
        log "node $id's Redis holds newer data (epoch, offset: $epoch $offset > $mine): not eligible; follow and catch up first"
        exit 1
    fi
done
exit 0
