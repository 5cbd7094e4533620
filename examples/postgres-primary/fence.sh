#!/bin/sh
# [fence] command, run by this host's keeper (`bully run --config nodeN.toml`, started
# by cluster.sh beside each node) whenever the office of this node ends here: its lease
# lapsed (the node is frozen, cut off from the others, or hung), the node died, or it
# handed over. The keeper runs it before the earliest instant any other node can be
# elected, and kills it at that instant. It acts on the LOCAL server only, which this
# host reaches whatever the network does, and by signal, not by SQL (a frozen server
# answers no query but keeps a signal pending): SIGINT to the postmaster, a fast
# shutdown (sessions ended, no new ones accepted from that instant), SIGQUIT after
# $STOP_MS. So the old primary acknowledges nothing from here on, whatever the new
# primary's hooks can or cannot reach.
#
# Environment from the keeper: BULLY_NODE_ID, BULLY_TOKEN (the token of the epoch that
# ended), BULLY_TERM, BULLY_COORDINATOR, BULLY_DATA_DIR. Left alone: a server promoted
# since for a newer epoch (a late fence: $BULLY_DATA_DIR/pg-promoted above
# BULLY_TOKEN), and a standby no on-elected.sh asked to promote.
set -eu
BULLY_HOOK=fence
. "$(dirname -- "$0")/common.sh"
token=${BULLY_TOKEN:?run me from bully run (BULLY_TOKEN is not set)}
held=$(promoted_token)
if [ "$held" -gt "$token" ]; then
    log "epoch $token ended, but the server was promoted since (epoch $held): left running"
    exit 0
fi
if innocent_standby "$BULLY_NODE_ID"; then
    log "epoch $token ended; the server is a standby never asked to promote: left running"
    exit 0
fi
pid=$(postmaster_pid "$BULLY_NODE_ID") || { log "epoch $token ended; the server does not run"; exit 0; }
kill -INT "$pid"
log "epoch $token ended here: fast shutdown of the server (pid $pid) requested"
stop_pg "$BULLY_NODE_ID" fast 500 || { log "the server did not stop (frozen?): its shutdown is pending"; exit 1; }
log "the server is stopped"
