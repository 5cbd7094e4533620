#!/bin/sh
# on_demoted: this node no longer leads (it stepped down, its check failed, or a higher
# node took over). Stop taking writes at once; on_change repoints this Redis at the new
# primary and unpauses it. The pause ends by itself after 30 s in case no primary shows up.
set -eu
. "$(dirname -- "$0")/common.sh"
rcli "$BULLY_NODE_ID" CLIENT PAUSE 30000 WRITE >/dev/null
log "writes paused until the new primary is known"
