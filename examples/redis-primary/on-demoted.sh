#!/bin/sh
# on_demoted: this node no longer leads (it stepped down, lost its lease, its check
# failed, or a higher node took over). Stop taking writes at once: CLIENT PAUSE WRITE
# (Redis >= 6.2) blocks writers; on-change.sh repoints this Redis at the new primary,
# then lifts the pause. The pause ends by itself after $PAUSE_MS; a primary whose
# replicas have left refuses writes anyway (min-replicas-to-write, see redis.sh).
set -eu
. "$(dirname -- "$0")/common.sh"
reply=$(rcli "$BULLY_NODE_ID" CLIENT PAUSE "$PAUSE_MS" WRITE 2>&1)
[ "$reply" = OK ] || { log "cannot pause writes: $reply"; exit 1; }
log "writes paused until the new primary is known"
