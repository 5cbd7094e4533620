#!/bin/sh
# on_change: the epoch this node follows or leads changed. A follower makes its server
# a standby of the coordinator's (rejoin.sh, in the background: a repoint, or a stop,
# pg_rewind and a start), but only once the coordinator's on-elected.sh has promoted
# that server for this epoch (bully.epoch >= $BULLY_EPOCH): before that, the
# coordinator's server may still be catching up. If it is not promoted yet this hook
# leaves the server alone, without waiting (hooks run one at a time: a wait here would
# delay this node's next on_elected): the coordinator's on_elected repoints every
# standby it reaches, and this node's health check starts rejoin.sh otherwise.
set -eu
. "$(dirname -- "$0")/common.sh"
[ "$BULLY_ROLE" = follower ] || exit 0
[ -n "${BULLY_COORDINATOR:-}" ] && [ "$BULLY_COORDINATOR" != "$BULLY_NODE_ID" ] || exit 0
if coordinator_promoted; then
    rejoining || start_rejoin
    log "rejoin.sh follows node $BULLY_COORDINATOR's server at epoch $BULLY_EPOCH"
else
    log "$follow_status; its on_elected or this node's health check will repoint this server"
fi
