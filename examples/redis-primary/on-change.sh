#!/bin/sh
# on_change: the epoch this node follows or leads changed. A follower points its Redis
# at the coordinator's, in a safe order: pause writes, REPLICAOF, then lift the pause
# (a Redis that was primary never acknowledges a write the resync then discards).
#
# It first waits (up to $FOLLOW_WAIT_MS) until the coordinator's on_elected has promoted
# that Redis for this epoch (bully:epoch >= $BULLY_EPOCH): before that, the coordinator's
# Redis may still be catching up, and replicating from it could discard newer data this
# Redis holds. If this Redis holds newer data than a coordinator's Redis that cannot
# catch up (a replica whose primary is gone), that coordinator's on_elected refuses and
# it resigns: this hook then stops waiting (exit 0) and the next on_change repoints.
set -eu
. "$(dirname -- "$0")/common.sh"
[ "$BULLY_ROLE" != coordinator ] || exit 0 # on-elected.sh made it the primary
token=${BULLY_EPOCH:?}

deadline=$(($(now_ms) + FOLLOW_WAIT_MS))
probe_error=""
while :; do
    if probe "$BULLY_COORDINATOR"; then
        [ "$role" = master ] && [ "$epoch" -ge "$token" ] && break
        theirs="$epoch $offset" stuck=false
        [ "$role" = slave ] && [ "$link" != up ] && stuck=true
        if $stuck && probe "$BULLY_NODE_ID" && is_fresher "$epoch $offset" "$theirs"; then
            log "node $BULLY_COORDINATOR's Redis holds older data ($theirs < $epoch $offset) and cannot catch up: it will not promote; staying as is"
            exit 0
        fi
    fi
    if [ "$(now_ms)" -ge "$deadline" ]; then
        log "node $BULLY_COORDINATOR's Redis was not promoted for epoch $token within $FOLLOW_WAIT_MS ms${probe_error:+ ($probe_error)}"
        exit 1
    fi
    sleep 0.02
done

primary=$(redis_of "$BULLY_COORDINATOR")
# Pause, repoint, unpause: one redis-cli, so the pause is as short as the REPLICAOF.
reply=$(printf '%s\n' "CLIENT PAUSE $PAUSE_MS WRITE" "REPLICAOF $primary" "CLIENT UNPAUSE" \
    | rcli "$BULLY_NODE_ID")
case $(printf '%s\n' "$reply" | sed -n 2p) in
OK*) ;;
*) log "REPLICAOF $primary failed: $reply"; exit 1 ;;
esac
log "replicating from node $BULLY_COORDINATOR's Redis at epoch $token"
