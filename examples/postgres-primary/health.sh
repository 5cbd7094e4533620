#!/bin/sh
# The [health] check: exit 0 when this node's PostgreSQL may become (or stay) the
# primary, and print `est=N` on stdout, N its WAL position as a decimal (written on a
# primary, received or replayed on a standby): bully's estimate of how fresh this
# node's data is (docs/design.md, Eligibility), the freshest eligible node leading.
#
# - The server must answer within $PG_TIMEOUT s (fails closed: a frozen, stopped or
#   cut-off server vouches for nothing). A node whose server is down (its keeper's
#   fence or on-demoted.sh stopped it) starts rejoin.sh, which rewinds it and starts it
#   as a standby of the coordinator's server, or, with no primary yet, starts it as a
#   standby of no one.
# - The coordinator: eligible while its server is the primary; while it is still a
#   standby it is eligible until on-elected.sh has promoted it for this epoch (while
#   the promotion runs, the promote marker of common.sh is there). A server in recovery
#   after that promotion, without the marker, restarted (pg.sh start always starts a
#   standby and removes the marker): not eligible, so bully hands the office to a node
#   that holds the data.
# - A follower whose server does not stream from the coordinator's (a fenced old
#   primary, a restarted server, a standby of a former primary) starts rejoin.sh, once
#   the coordinator's server is promoted for this epoch. Nothing else would: a restart
#   changes no epoch, so no hook runs, and the cluster would run a standby short for
#   good. This check runs every interval_ms, which makes it the periodic path. While
#   rejoin.sh stops and rewinds the server, the server does not answer: not eligible.
# - Any other standby is eligible: on-elected.sh refuses to promote it unless it holds
#   every acknowledged commit (it compares positions with the other standbys), so a
#   stale standby that is elected resigns and a fresher one leads.
# - A primary that does not lead (the old primary, not stopped yet) is eligible only
#   while no coordinator is known.
set -eu
. "$(dirname -- "$0")/common.sh"
me=$BULLY_NODE_ID
coordinator=${BULLY_COORDINATOR:-}
follower=false
if [ "$BULLY_ROLE" = follower ] && [ -n "$coordinator" ] && [ "$coordinator" != "$me" ]; then
    follower=true
fi

if [ -e "$(data_dir "$me").rewind-failed" ] && [ "$ALLOW_REINIT" != 1 ]; then
    log "pg_rewind failed on this server's data directory ($(data_dir "$me").rewind-failed): out until a human looks"
    exit 1
fi
if ! probe "$me"; then
    log "own server unreachable: $probe_error"
    if ! postmaster_pid "$me" >/dev/null && ! rejoining; then
        log "starting rejoin.sh: the server is down"
        start_rejoin
    fi
    exit 1
fi
echo "est=$lsn"

if [ "$BULLY_ROLE" = coordinator ]; then
    [ "$in_recovery" = f ] && exit 0
    # on-elected.sh leaves the promote marker before it asks for the promotion, and
    # pg.sh start removes it: a server in recovery without it after this epoch's
    # promotion was restarted.
    if [ ! -e "$(promote_marker "$me")" ] && [ "${BULLY_EPOCH:-0}" -gt 0 ] \
        && [ "$(promoted_token)" -ge "$BULLY_EPOCH" ]; then
        log "the server runs in recovery after on-elected.sh promoted it for epoch $BULLY_EPOCH: it restarted; not eligible"
        exit 1
    fi
    exit 0 # on_elected has yet to promote it
fi

if $follower; then
    primary=$(pg_of "$coordinator" | tr ' ' :)
    if [ "$in_recovery" = t ] && [ "$wal_status" = streaming ] && [ "$sender" = "$primary" ]; then
        exit 0
    fi
    mine="$in_recovery $wal_status $sender"
    if ! rejoining && coordinator_promoted; then
        log "the server ($mine) does not stream from node $coordinator's ($primary): starting rejoin.sh"
        start_rejoin
    fi
    # shellcheck disable=SC2086 # the fields split on purpose
    set -- $mine
    in_recovery=$1
fi

if [ "$in_recovery" = f ] && [ -n "$coordinator" ] && [ "$coordinator" != "$me" ]; then
    log "a primary while node $coordinator leads: not eligible"
    exit 1
fi
exit 0
