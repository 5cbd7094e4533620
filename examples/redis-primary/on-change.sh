#!/bin/sh
# on_change: the epoch this node follows or leads changed. A follower points its Redis
# at the coordinator's (pause writes, REPLICAOF, lift the pause: see repoint in
# common.sh), but only once the coordinator's on_elected has promoted that Redis for
# this epoch (bully:epoch >= $BULLY_EPOCH): before that, the coordinator's Redis may
# still be catching up, and replicating from it could discard newer data this Redis
# holds. If it is not promoted yet, this hook leaves the Redis alone, without waiting
# (hooks run one at a time: a wait here would delay this node's next on_elected): the
# coordinator's on_elected repoints every Redis it reaches once it has promoted its
# own, and this node's health check repoints it otherwise (follow_coordinator in
# common.sh, shared with health.sh).
set -eu
. "$(dirname -- "$0")/common.sh"
[ "$BULLY_ROLE" != coordinator ] || exit 0 # on-elected.sh made it the primary

if follow_coordinator; then
    log "replicating from node $BULLY_COORDINATOR's Redis at epoch $BULLY_EPOCH"
else
    log "$follow_status; its on_elected or this node's health check will repoint this Redis"
fi
