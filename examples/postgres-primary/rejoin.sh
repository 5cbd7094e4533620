#!/bin/sh
# Makes this node's server a standby of the coordinator's, started in the background
# by health.sh and on-change.sh (start_rejoin in common.sh: a session of its own, so no
# hook timeout kills a pg_rewind halfway), one at a time (a lock beside the data
# directory), output appended to $PG_ROOT/nodeID.rejoin.log. Acts only once the
# coordinator's server is promoted for this epoch ($BULLY_EPOCH); until then it only
# starts a server that is down, as a standby of no one (read-only: its position then
# counts in the next election, and no server is left down for want of a primary).
#
# 1. A running standby is repointed (primary_conninfo, a reload) and must then stream
#    from the coordinator's server within $FOLLOW_MS; done.
# 2. Otherwise (the server is down: fenced, stopped; or a former primary; or a standby
#    that cannot follow the new timeline because it holds WAL the new primary never
#    had, which no standby ever acknowledged): stop it, CHECKPOINT the coordinator's
#    server (pg_rewind reads its timeline from its control file), pg_rewind it from the
#    coordinator's server (pg_rewind runs crash recovery first when the server was
#    killed; "no rewind required" when it did not diverge; -R writes standby.signal and
#    primary_conninfo) and start it as a standby (pg.sh start). pg_rewind logs where
#    the histories diverged: what this server held past that point was never
#    acknowledged (on-elected.sh promotes only a server holding every acknowledged
#    commit) and is discarded.
# 3. If pg_rewind stops before it changed anything because this server's control file
#    is behind its own WAL (stale_control_timeline below), the data directory is moved
#    aside (never deleted) and cloned from the primary (pg_basebackup).
# 4. If pg_rewind fails otherwise, the data directory is LEFT AS IT IS and the node stays out
#    (stopped, not eligible): it may hold the only copy of something. A marker
#    $PG_ROOT/nodeID.rewind-failed says so. With ALLOW_REINIT=1 it is moved aside
#    (nodeID.failed-<time>, never deleted) and cloned from the primary (pg_basebackup).
#    A pg_rewind that fails before it compared the histories (the source went away)
#    changed nothing: no marker, the next health check retries.
set -eu
BULLY_HOOK=rejoin
. "$(dirname -- "$0")/common.sh"
me=$BULLY_NODE_ID
dir=$(data_dir "$me")
exec 9>> "$dir.rejoin.lock"
flock -n 9 || exit 0
echo $$ > "$dir.rejoin.pid" # tests kill a rejoin still running by this PID

if ! coordinator_promoted; then
    # No primary to follow yet. A server that is down (fenced, stopped) comes back as
    # a standby of no one, read-only: its position counts in the next election.
    if ! postmaster_pid "$me" >/dev/null; then
        "$here/pg.sh" start "$me" >&2 9>&- # the server must not inherit the lock
        log "no primary to follow yet ($follow_status): started the server as a standby"
    fi
    exit 0
fi
src=$BULLY_COORDINATOR
src_addr=$(pg_of "$src" | tr ' ' :)
want=$(conninfo "$src" "node$me")
if [ -e "$dir.rewind-failed" ] && [ "$ALLOW_REINIT" != 1 ]; then
    log "an earlier pg_rewind failed ($dir.rewind-failed): the data directory waits for a human (or ALLOW_REINIT=1)"
    exit 1
fi

# streams: the WAL receiver streams from the coordinator's server, seen three times
# 0.1 s apart (a receiver that cannot follow the new timeline connects, fails and
# retries: it may look "streaming" for an instant).
streams() {
    for _ in 1 2 3; do
        probe "$me" && [ "$in_recovery" = t ] && [ "$wal_status" = streaming ] \
            && [ "$sender" = "$src_addr" ] || return 1
        sleep 0.1
    done
}

if probe "$me" && [ "$in_recovery" = t ]; then
    if streams; then exit 0; fi
    sql "$me" "ALTER SYSTEM SET primary_conninfo = '$want'" "SELECT pg_reload_conf()" >/dev/null || true
    deadline=$(($(now_ms) + FOLLOW_MS))
    until streams; do
        if [ "$(now_ms)" -ge "$deadline" ]; then break; fi
        sleep 0.05
    done
    if streams; then
        log "streams from node $src's server (repointed)"
        exit 0
    fi
    log "does not stream from node $src's server within $FOLLOW_MS ms (at $lsn, timeline $tli)"
    # A running standby is stopped for a rewind only while its source is there.
    coordinator_promoted || { log "$follow_status: left running"; exit 0; }
    log "rewinding"
fi

# stale_control_timeline PG_REWIND_OUTPUT: whether pg_rewind stopped before it changed
# anything (it never got to "rewinding from last common checkpoint") because this
# server's control file is behind its WAL: the last checkpoint on an older timeline
# than the one its recovery reached (set: checkpoint_tli, wal_tli). A fenced primary
# restarted as a standby replays its newer timeline but gets no restartpoint there
# until a checkpoint record arrives; pg_rewind then compares the wrong history and
# cannot read its own WAL at the fork. The data directory is then as it was, and
# cloning it loses nothing a rewind would have kept.
stale_control_timeline() {
    case $1 in *"rewinding from last common checkpoint"*) return 1 ;; esac
    control=$(as_pg "$PG_BIN/pg_controldata" "$dir" 2>/dev/null) || return 1
    checkpoint_tli=$(printf '%s\n' "$control" | sed -n "s/^Latest checkpoint's TimeLineID: *//p")
    wal_tli=$(printf '%s\n' "$control" | sed -n "s/^Min recovery ending loc's timeline: *//p")
    [ -n "$checkpoint_tli" ] && [ -n "$wal_tli" ] && [ "$wal_tli" -gt "$checkpoint_tli" ]
}

# rewind_and_start: stop, pg_rewind, start as a standby. Returns 2 when pg_rewind
# failed for good (the data directory is left as it is), 1 when it could not start or
# the server did not come up.
rewind_and_start() {
    stop_pg "$me" fast || { log "the server did not stop: not rewinding"; return 1; }
    as_pg rm -f "$dir/standby.signal" # pg_rewind's crash recovery runs single-user, not as a standby
    # pg_rewind reads the source's timeline from its control file, which a newly
    # promoted server updates only at its first checkpoint (a spread one, minutes
    # away): without this it rewinds against the old timeline, or finds "no rewind
    # required", and the server then cannot start.
    call_timeout=30
    reply=$(sql "$src" "CHECKPOINT") || { call_timeout=$PG_TIMEOUT; log "CHECKPOINT on node $src's server failed: $reply"; return 1; }
    call_timeout=$PG_TIMEOUT
    log "pg_rewind from node $src's server (epoch $BULLY_EPOCH)"
    if out=$(as_pg "$PG_BIN/pg_rewind" -D "$dir" --source-server="$want" -R 2>&1); then
        printf '%s\n' "$out"
        rm -f "$dir.rewind-failed"
    else
        printf '%s\n' "$out"
        as_pg touch "$dir/standby.signal"
        case $out in
        *"servers diverged"* | *"no rewind required"*) ;;
        *)
            # It failed before it compared the histories (the source went away, refused
            # the connection): it changed nothing, the next attempt starts afresh.
            "$here/pg.sh" start "$me" >&2 9>&- || true
            log "pg_rewind could not start (nothing changed): the server runs again as a standby; the next health check retries"
            return 1
            ;;
        esac
        if stale_control_timeline "$out"; then
            log "pg_rewind changed nothing: this server's control file has its last checkpoint on timeline $checkpoint_tli while its WAL reached timeline $wal_tli (a standby stopped before its first restartpoint on the newer timeline), and PostgreSQL 15's pg_rewind reads the former; only a clone can bring it back"
        elif [ "$ALLOW_REINIT" != 1 ]; then
            touch "$dir.rewind-failed"
            log "pg_rewind FAILED: $dir is left as it is (it may hold commits no other server has); inspect it, then remove $dir.rewind-failed, or set ALLOW_REINIT=1 to move it aside and clone the primary"
            return 2
        fi
        aside="$dir.failed-$(date +%s)"
        mv "$dir" "$aside"
        log "moved the data directory to $aside (kept: what it held past the fork was never acknowledged), cloning node $src's server"
        as_pg "$PG_BIN/pg_basebackup" -d "$want" -D "$dir" -X stream -c fast -R
        rm -f "$dir.rewind-failed"
    fi
    "$here/pg.sh" start "$me" >&2 9>&- # the server must not inherit the lock
}

# A rewound server that fails to start (seen here: its first recovery stopped short of
# the new timeline) is rewound once more; its data directory is unchanged by a failed
# start.
rc=0
rewind_and_start || rc=$?
if [ "$rc" = 1 ] && coordinator_promoted; then
    log "the server did not come up after the rewind: once more"
    rc=0
    rewind_and_start || rc=$?
fi
[ "$rc" = 0 ] || exit 1
log "the server runs as a standby of node $src's"
