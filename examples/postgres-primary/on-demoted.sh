#!/bin/sh
# on_demoted: this node no longer leads (it stepped down, lost its lease, its check
# failed, it resigned, or a higher node took over). Its server stops taking writes at
# once: a fast shutdown (sessions ended, no new ones, the standbys still receive its
# last WAL), immediate after $STOP_MS. A standby no on-elected.sh asked to promote is
# left alone (stopping it could leave no server to promote). The node's health check
# brings the server back as a standby of the new primary (rejoin.sh).
set -eu
. "$(dirname -- "$0")/common.sh"
if innocent_standby "$BULLY_NODE_ID"; then
    log "the server is a standby never asked to promote: left running"
    exit 0
fi
stop_pg "$BULLY_NODE_ID" fast 500 || { log "the server did not stop (frozen?): its stop is pending"; exit 1; }
log "the server is stopped; it rejoins as a standby once the new primary is known"
