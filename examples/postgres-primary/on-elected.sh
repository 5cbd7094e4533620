#!/bin/sh
# on_elected: this node leads epoch $BULLY_EPOCH; make its PostgreSQL the primary
# without losing a commit another server acknowledged, and without a second writable
# primary:
#
# 1. Refuse (exit 1: bully resigns, another node leads) if another server carries a
#    newer epoch (bully.epoch): this hook is stale.
# 2. Fence: every other server that answers and is NOT in recovery (an old primary its
#    keeper did not stop) gets default_transaction_read_only = on and its client
#    sessions terminated. The first fence is the old primary's own keeper (fence.sh),
#    which stopped it before this node could be elected; a server that does not answer
#    within $PEER_TIMEOUT s (killed, frozen, cut off) is left to it.
# 3. Check it is safe: with synchronous_standby_names = 'ANY K (...)' every
#    acknowledged commit is on the primary and on K standbys, so among any N - K of
#    the N servers that were standbys one holds it, and the freshest of them holds
#    every one. This server must have read N - K standbys (itself included) and hold at
#    least the (timeline, WAL position) of each; it waits up to $CATCH_UP_MS for its WAL receiver to
#    get there (and to the fenced old primary's position, if that one answered: then
#    nothing is dropped). Otherwise it refuses: a fresher standby must lead, and
#    refusing costs one resign (resign_for_ms); with est= (health.sh) bully elects the
#    freshest in the first place.
# 4. Promote: ALTER SYSTEM the standby names to the other nodes ('ANY K (...)'),
#    read-write, no upstream, bully.epoch = the token (readable by every client and by
#    the other nodes' scripts); remember the token in $BULLY_DATA_DIR/pg-promoted and
#    leave the promote marker (common.sh), then pg_promote() and wait for it.
# 5. Repoint every other standby that answered at this server (primary_conninfo, a
#    reload): the standby names are met as soon as one follows. The others are brought
#    back by their own node (health.sh / on-change.sh start rejoin.sh).
# Bully answers /coordinator 200 (coordinator_ready = "hook_ok") only after exit 0.
set -eu
. "$(dirname -- "$0")/common.sh"
token=${BULLY_EPOCH:?}
me=$BULLY_NODE_ID

probe "$me" || { log "own server unreachable: $probe_error"; exit 1; }
[ "$epoch" -le "$token" ] || [ "$in_recovery" = t ] || { log "own server is a primary of epoch $epoch > $token: stale hook"; exit 1; }
mine="$tli $lsn"
was_standby=$in_recovery
my_receiver=$wal_status

standbys=0 best="0 0" best_id="" old="0 0" old_ids="" answered=""
[ "$was_standby" = t ] && standbys=1
for id in $(other_ids); do
    if ! peer probe "$id"; then
        log "node $id's server: $probe_error; left to its keeper's fence"
        continue
    fi
    if [ "$in_recovery" = f ]; then
        if [ "$epoch" -gt "$token" ]; then
            log "node $id's server is the primary of epoch $epoch > $token: not promoting"
            exit 1
        fi
        reply=$(peer sql "$id" "ALTER SYSTEM SET default_transaction_read_only = on" \
            "SELECT pg_reload_conf()" \
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()") || {
            log "cannot fence node $id's server (${reply:-no answer}); left to its keeper's fence"
            continue
        }
        peer probe "$id" || continue
        log "fenced node $id's server (an old primary at timeline $tli, $lsn): read-only, sessions ended"
        old_ids="$old_ids $id"
        ! is_fresher "$tli $lsn" "$old" || old="$tli $lsn"
        continue
    fi
    answered="$answered $id"
    standbys=$((standbys + 1))
    if is_fresher "$tli $lsn" "$best"; then best="$tli $lsn" best_id=$id; fi
done

# What must be here before promoting: the freshest standby's data, and the fenced old
# primary's if it answered (then nothing is dropped).
need=$((node_count - SYNC_COUNT))
target=$best
! is_fresher "$old" "$target" || target=$old
# Only a WAL receiver that streams can catch up: without one, waiting is no use.
if [ "$was_standby" = t ] && [ "$my_receiver" = streaming ] && is_fresher "$target" "$mine"; then
    deadline=$(($(now_ms) + CATCH_UP_MS))
    while is_fresher "$target" "$mine" && [ "$(now_ms)" -lt "$deadline" ]; do
        sleep 0.02
        probe "$me" || { log "own server unreachable: $probe_error"; exit 1; }
        mine="$tli $lsn"
    done
fi
if [ "$was_standby" = t ]; then
    if [ "$standbys" -ge "$need" ] && ! is_fresher "$best" "$mine"; then
        ! is_fresher "$old" "$mine" || log "the fenced old primary's WAL past $mine ($old) was never acknowledged by a standby: dropped (it rejoins with pg_rewind)"
    elif [ -n "$old_ids" ] && ! is_fresher "$old" "$mine"; then
        log "caught up with the fenced old primary (node$old_ids) at $old"
    elif [ "$standbys" -lt "$need" ]; then
        log "only $standbys of the $need standbys needed to know every acknowledged commit answered (and no old primary to catch up from): not promoting"
        exit 1
    else
        log "node $best_id's standby holds newer WAL (timeline, position: $best > $mine): not promoting; the freshest standby must lead"
        exit 1
    fi
fi

names=""
for id in $(other_ids); do names="${names:+$names, }node$id"; done
remember_promoted "$token"
touch "$(promote_marker "$me")"
reply=$(sql "$me" "ALTER SYSTEM SET synchronous_standby_names = 'ANY $SYNC_COUNT ($names)'" \
    "ALTER SYSTEM SET default_transaction_read_only = off" \
    "ALTER SYSTEM SET primary_conninfo = ''" \
    "ALTER SYSTEM SET bully.epoch = '$token'" \
    "SELECT pg_reload_conf()") || { log "cannot configure the server: $reply"; exit 1; }
if [ "$was_standby" = t ]; then
    call_timeout=$((PG_TIMEOUT + 30))
    reply=$(sql "$me" "SELECT pg_promote(true, 30)") || true
    call_timeout=$PG_TIMEOUT
    [ "$reply" = t ] || { log "pg_promote failed: $reply"; exit 1; }
fi
# The reload reaches every backend before its next query; read it back to be sure.
deadline=$(($(now_ms) + 2000))
until probe "$me" && [ "$in_recovery" = f ] && [ "$ro" = off ] && [ "$epoch" = "$token" ]; do
    [ "$(now_ms)" -lt "$deadline" ] || { log "the server is not a read-write primary of epoch $token after promotion"; exit 1; }
    sleep 0.02
done
log "the server is the primary at epoch $token (timeline $tli, lsn $lsn)${old_ids:+; fenced the old primary of node(s)$old_ids}"

for id in $answered; do
    reply=$(peer sql "$id" "ALTER SYSTEM SET primary_conninfo = '$(conninfo "$me" "node$id")'" \
        "SELECT pg_reload_conf()") || log "cannot repoint node $id's standby: $reply"
done
