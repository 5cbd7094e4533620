#!/bin/sh
# [fence] command, run by this host's keeper (`bully run --config nodeN.toml`, started
# by cluster.sh beside each node) whenever the office of this node ends here: its lease
# lapsed (the node is frozen, cut off from the others, or hung), the node died, or it
# handed over. The keeper runs it before the earliest instant any other node can be
# elected, and kills it at that instant, so it must be quick: one redis-cli on the
# LOCAL Redis, bounded by $REDIS_TIMEOUT, which this host reaches even when it is cut
# off from the others.
#
# It pauses writes (CLIENT PAUSE $PAUSE_MS WRITE, Redis >= 6.2): writers block, so the
# old primary acknowledges nothing from here on, whatever the new primary's hooks can
# or cannot reach. The pause is lifted when this Redis is repointed at the new primary
# (on-change.sh, or the health check) or promoted again (on-elected.sh); it ends by
# itself after $PAUSE_MS.
#
# Environment from the keeper: BULLY_NODE_ID, BULLY_TOKEN (the token of the epoch that
# ended), BULLY_TERM, BULLY_COORDINATOR. A late fence (a keeper woken long after its
# epoch ended) must not freeze a primary this node has since promoted for a newer
# epoch: if the Redis holds a bully:epoch above BULLY_TOKEN, the pause is lifted again.
set -eu
BULLY_HOOK=fence
. "$(dirname -- "$0")/common.sh"
token=${BULLY_TOKEN:?run me from bully run (BULLY_TOKEN is not set)}

reply=$(printf '%s\n' "CLIENT PAUSE $PAUSE_MS WRITE" "GET bully:epoch" | rcli "$BULLY_NODE_ID" 2>&1) || true
paused=$(printf '%s\n' "$reply" | sed -n 1p)
held=$(printf '%s\n' "$reply" | sed -n 2p)
[ "$paused" = OK ] || { log "cannot pause writes: ${reply:-no answer within $REDIS_TIMEOUT s}"; exit 1; }
case $held in '' | *[!0-9]*) held=0 ;; esac
if [ "$held" -gt "$token" ]; then
    rcli "$BULLY_NODE_ID" CLIENT UNPAUSE >/dev/null
    log "epoch $token ended, but this Redis was promoted since (epoch $held): not paused"
    exit 0
fi
log "epoch $token ended here: writes paused (for at most $PAUSE_MS ms)"
