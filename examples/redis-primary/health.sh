#!/bin/sh
# The [health] check: exit 0 when this node's Redis may become (or stay) the primary.
# Judged by the data, never by zero lag (a replica under writes is always a little
# behind):
#
# - The coordinator's Redis must be the very process its on_elected promoted (the
#   run_id on_elected left in $BULLY_DATA_DIR/redis-promoted). A Redis killed and
#   restarted under a living bully is another process, empty or from an old RDB file:
#   the check fails, bully steps the node down, and a node whose Redis holds the data
#   is elected (redis.conf makes the restarted Redis come up read-only, as a replica of
#   nothing, so it neither takes writes nor empties the replicas meanwhile).
# - A follower whose Redis does not replicate from the coordinator's (it restarted, or
#   a repoint was missed) is repointed here, once the coordinator's Redis is promoted
#   for this epoch (follow_coordinator in common.sh, as on-change.sh does): nothing
#   else would, and the cluster would run a replica short. The check runs every
#   interval_ms, so this is the periodic path; it costs one more redis-cli only while
#   the Redis is off its primary, and never promotes anything.
# - A replica with its link up is eligible while it is at most $MAX_LAG_BYTES behind its
#   primary; the check then remembers the Redis run_id in $BULLY_DATA_DIR/redis-synced.
#   If it is elected while the old primary lives (a takeover, a paused or cut-off
#   coordinator), on-elected.sh fences the old primary and catches up the rest first.
# - A replica whose primary is gone (link down, or up but the primary does not answer
#   within $REDIS_TIMEOUT s: frozen or cut off) stays eligible if this very Redis
#   process (same run_id) had caught up before: it holds the data. on-elected.sh refuses to promote
#   it if another Redis holds newer data (the most up-to-date replica must lead).
# - A replica still loading a full sync, or one that never caught up, is not eligible.
# - A primary is eligible while this node is the coordinator. Otherwise (a Redis that
#   restarted, with or without its RDB file, so still a replica of redis.conf's closed
#   port, $NO_PRIMARY, or a demoted primary not yet repointed) only if every other Redis
#   answers and none holds newer data (a higher bully:epoch, then a higher replication
#   offset): an empty Redis, or one restarted from an old RDB file, never leads while
#   another holds newer data, so it never becomes the source of a resync; and after a
#   full-cluster restart the Redis with the newest RDB is eligible (ties: the highest
#   node ID leads).
# - Fails closed: a Redis that cannot be reached, does not answer within
#   $REDIS_TIMEOUT s or refuses our password (NOAUTH, WRONGPASS) vouches for nothing,
#   and a Redis older than 6.2 is refused.
set -eu
. "$(dirname -- "$0")/common.sh"

probe "$BULLY_NODE_ID" || { log "own Redis unreachable: $probe_error"; exit 1; }
check_version || exit 1

if [ "$BULLY_ROLE" = coordinator ]; then
    promoted=$(promoted_run_id)
    if [ -n "$promoted" ] && [ "$promoted" != "$run_id" ]; then
        log "this Redis (run_id $run_id) is not the one on_elected promoted ($promoted): it restarted; not eligible, a Redis with the data must lead"
        exit 1
    fi
fi

if [ "$BULLY_ROLE" = follower ] && [ -n "${BULLY_COORDINATOR:-}" ] \
    && [ "$BULLY_COORDINATOR" != "$BULLY_NODE_ID" ]; then
    primary=$(redis_of "$BULLY_COORDINATOR") || primary=""
    if [ -n "$primary" ] && { [ "$role" = master ] || [ "$mhost $mport" != "$primary" ]; }; then
        if follow_coordinator; then
            log "this Redis did not replicate from node $BULLY_COORDINATOR's: repointed it there"
        fi
        probe "$BULLY_NODE_ID" || { log "own Redis unreachable: $probe_error"; exit 1; }
    fi
fi

mine="$epoch $offset"
marker="${BULLY_DATA_DIR:?}/redis-synced"
synced_before() { [ -f "$marker" ] && [ "$(cat "$marker")" = "$run_id" ]; }
mark_synced() {
    synced_before && return 0
    printf '%s\n' "$run_id" > "$marker.tmp" && mv "$marker.tmp" "$marker"
}

if [ "$role" = slave ] && ! no_primary "$mhost" "$mport"; then
    if [ "$syncing" = 1 ]; then
        log "loading a full sync from its primary"
        exit 1
    fi
    if [ "$link" = up ]; then
        theirs=$(redis_at "$mhost" "$mport" INFO replication 2>&1 \
            | sed -n 's/^master_repl_offset:\([0-9]*\).*/\1/p') || true
        case $theirs in
        '' | *[!0-9]*)
            # Its link still looks up (Redis notices a silent primary only after
            # repl-timeout, 60 s), but the primary is frozen or cut off: judged as gone.
            synced_before && exit 0
            log "primary $mhost:$mport does not answer its INFO within $REDIS_TIMEOUT s, and this Redis never caught up"
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

if [ "$role" = master ] && [ "$BULLY_ROLE" = coordinator ]; then
    mark_synced
    exit 0
fi

# Follows no one (a primary that does not lead, or a restarted Redis still a replica of
# redis.conf's closed port, $NO_PRIMARY): eligible only with the newest data of all.
for id in $(other_ids); do
    probe "$id" || { log "cannot read node $id's Redis ($probe_error): not eligible"; exit 1; }
    if is_fresher "$epoch $offset" "$mine"; then
        log "node $id's Redis holds newer data (epoch, offset: $epoch $offset > $mine): not eligible; follow and catch up first"
        exit 1
    fi
done
exit 0
