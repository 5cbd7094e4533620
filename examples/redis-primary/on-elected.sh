#!/bin/sh
# on_elected: this node leads epoch $BULLY_EPOCH; make its Redis the primary without
# losing a write another Redis acknowledged, and without a second writable primary:
#
# 1. Refuse (exit 1: bully resigns, another node leads) if another Redis already holds
#    data of a newer epoch: this hook is stale.
# 2. Fence: every other Redis that is a primary and answers stops taking writes (CLIENT
#    PAUSE WRITE for $PAUSE_MS), so from here on nothing can be acknowledged elsewhere.
#    This is the second fence: the old primary's own keeper (`bully run`, fence.sh)
#    paused it when its office ended, before this node could be elected, even if that
#    host is cut off or its bully frozen. So a Redis that does not answer within
#    $PEER_TIMEOUT s (frozen, cut off, killed) is left to its keeper: this hook never
#    fails or waits longer for it.
# 3. Catch up: if another Redis holds newer data, this Redis must be replicating from it
#    with its link up (the fenced old primary) and reach its offset within $CATCH_UP_MS;
#    otherwise refuse: the node with the most up-to-date Redis must lead instead.
# 4. Promote: REPLICAOF NO ONE, lift any pause on this Redis, store the epoch in
#    bully:epoch (the fencing token, next to the data). The Redis run_id is remembered
#    in $BULLY_DATA_DIR/redis-promoted first: the health check fails once the Redis is
#    another process (restarted), so the node steps down.
# 5. Repoint every other Redis that answered and does not follow this one yet (pause,
#    REPLICAOF, unpause): the followers' on_change may have run before this promotion,
#    and left their Redis for this hook to repoint. A Redis that did not answer is
#    repointed later by its own node (on_change, or its health check).
# Bully answers /coordinator 200 (coordinator_ready = "hook_ok") only after exit 0.
set -eu
. "$(dirname -- "$0")/common.sh"
token=${BULLY_EPOCH:?}

probe "$BULLY_NODE_ID" || { log "own Redis unreachable: $probe_error"; exit 1; }
check_version || exit 1
remember_promoted "$run_id"

masters="" answered=""
for id in $(other_ids); do
    if ! peer probe "$id"; then
        log "node $id's Redis: $probe_error; left to its keeper's fence, not caught up from"
        continue # killed, frozen or cut off: its keeper fenced it
    fi
    if [ "$epoch" -gt "$token" ]; then
        log "node $id's Redis holds data of epoch $epoch > $token: not promoting"
        exit 1
    fi
    if [ "$role" = master ]; then
        masters="$masters $id"
    else
        answered="$answered $id"
    fi
done
fenced=""
for id in $masters; do
    reply=$(peer rcli "$id" CLIENT PAUSE "$PAUSE_MS" WRITE 2>&1) || true
    if [ "$reply" = OK ]; then
        fenced="$fenced $id"
        answered="$answered $id"
    else
        log "cannot fence node $id's Redis (${reply:-no answer within $PEER_TIMEOUT s}); left to its keeper's fence, not caught up from"
    fi
done
# The offsets of the Redis servers that answered, read again now that none of them
# takes writes.
seen=""
for id in $answered; do
    peer probe "$id" && seen="$seen $id:$epoch:$offset"
done

# The Redis with the newest data.
best="" source=""
for entry in $seen; do
    id=${entry%%:*} rest=${entry#*:}
    e=${rest%%:*} o=${rest#*:}
    if [ -z "$best" ] || is_fresher "$e $o" "$best"; then
        best="$e $o" source=$id
    fi
done
probe "$BULLY_NODE_ID" || { log "own Redis unreachable: $probe_error"; exit 1; }
if [ -n "$source" ] && is_fresher "$best" "$epoch $offset"; then
    # shellcheck disable=SC2046 # "host port" splits on purpose
    set -- $(redis_of "$source")
    if [ "$mhost" != "$1" ] || [ "$mport" != "$2" ] || [ "$link" != up ]; then
        log "node $source's Redis holds newer data ($best > $epoch $offset) and this Redis does not replicate from it: not promoting"
        exit 1
    fi
    deadline=$(($(now_ms) + CATCH_UP_MS))
    while is_fresher "$best" "$epoch $offset"; do
        [ "$(now_ms)" -lt "$deadline" ] || {
            log "did not catch up with node $source's Redis ($best) within $CATCH_UP_MS ms"
            exit 1
        }
        sleep 0.01
        probe "$BULLY_NODE_ID" || { log "own Redis unreachable: $probe_error"; exit 1; }
    done
fi

# Promote, lift any pause (an earlier on_demoted, another node's fence) and store the
# epoch; the epoch write must not wait for replicas (min-replicas-to-write): none
# follow yet. One redis-cli for all of it.
reply=$(printf '%s\n' "REPLICAOF NO ONE" "CLIENT UNPAUSE" "CONFIG GET min-replicas-to-write" \
    "CONFIG SET min-replicas-to-write 0" "SET bully:epoch $token" | rcli "$BULLY_NODE_ID" 2>&1)
min=$(printf '%s\n' "$reply" | sed -n 4p)
stored=$(printf '%s\n' "$reply" | sed -n 6p)
rcli "$BULLY_NODE_ID" CONFIG SET min-replicas-to-write "${min:-0}" >/dev/null
[ "$stored" = OK ] || { log "promotion failed: $reply"; exit 1; }
log "Redis is the primary at epoch $token${fenced:+ (fenced the Redis of node(s)$fenced)}"

# The others follow this Redis now (a no-op for those already following it).
for entry in $seen; do
    id=${entry%%:*}
    peer repoint "$id" "$BULLY_NODE_ID" || true
done
