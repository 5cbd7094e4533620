#!/bin/sh
# on_elected: this node leads epoch $BULLY_EPOCH, so its Redis becomes the primary.
# Runs again on every re-declaration (a new epoch), which is harmless: REPLICAOF NO ONE
# on a primary is a no-op.
set -eu
. "$(dirname -- "$0")/common.sh"
rcli "$BULLY_NODE_ID" CLIENT UNPAUSE >/dev/null
reply=$(rcli "$BULLY_NODE_ID" REPLICAOF NO ONE)
[ "$reply" = OK ] || { log "REPLICAOF NO ONE failed: $reply"; exit 1; }
# Leave the fencing token where clients can read it next to the data.
rcli "$BULLY_NODE_ID" SET bully:epoch "$BULLY_EPOCH" >/dev/null
log "Redis is the primary at epoch $BULLY_EPOCH"
