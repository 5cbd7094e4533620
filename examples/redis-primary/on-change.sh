#!/bin/sh
# on_change: the epoch this node follows or leads changed. Point this node's Redis at
# the coordinator's Redis (or make it the primary when this node is the coordinator).
set -eu
. "$(dirname -- "$0")/common.sh"
rcli "$BULLY_NODE_ID" CLIENT UNPAUSE >/dev/null
if [ "$BULLY_ROLE" = coordinator ]; then
    reply=$(rcli "$BULLY_NODE_ID" REPLICAOF NO ONE)
else
    primary=$(redis_of "$BULLY_COORDINATOR")
    # shellcheck disable=SC2086 # "host port" splits on purpose
    reply=$(rcli "$BULLY_NODE_ID" REPLICAOF $primary)
fi
case $reply in
    OK*) log "following node ${BULLY_COORDINATOR} at epoch $BULLY_EPOCH ($reply)" ;;
    *) log "REPLICAOF failed: $reply"; exit 1 ;;
esac
