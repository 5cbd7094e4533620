#!/bin/sh
# The PostgreSQL servers of the example (cluster.sh and tests/postgres_failover.rs run
# them through this file):
#   init           three data directories under $PG_ROOT holding the same data: initdb
#                  of node 1 (trust on loopback, superuser "postgres", postgresql.conf
#                  appended; initdb and pg_basebackup without fsync, for speed: the
#                  servers sync what they write from then on), node 1 started,
#                  pg_basebackup of nodes 2 and 3 from it, both streaming from node 1
#                  until its clean stop, so all three end at the same WAL position
#                  (the first election may pick any)
#   start ID       starts node ID's server as a STANDBY (standby.signal, always), on its
#                  host and port from the nodes file, and waits until it answers: a
#                  server never comes up writable by itself; bully promotes it
#                  (on-elected.sh) or makes it follow the primary (rejoin.sh)
#   stop ID        fast shutdown (immediate after $STOP_MS)
#   kill ID        kill -9 of the postmaster and of its children
#   status         role, WAL position, timeline and upstream of every server
# As root, the data directories belong to $PG_USER (postgres) and the servers run as
# that user; $PG_ROOT must then be a directory that user can reach.
set -eu
BULLY_NODE_ID=${2:-0}
BULLY_HOOK=pg.sh
. "$(dirname -- "$0")/common.sh"

# own_root: $PG_ROOT, created and owned by the user the servers run as.
own_root() {
    mkdir -p "$PG_ROOT"
    if [ "$(id -u)" = 0 ]; then
        chown "$PG_USER" "$PG_ROOT"
        as_pg test -w "$PG_ROOT" || {
            echo "pg.sh: $PG_USER cannot write $PG_ROOT (a parent directory closed to it?): set PG_ROOT, e.g. PG_ROOT=/var/tmp/bully-pg" >&2
            exit 2
        }
    fi
    chmod 700 "$PG_ROOT"
}

start() {
    # shellcheck disable=SC2046 # "host port" splits on purpose
    set -- "$1" $(addr_for "$1")
    sdir=$(data_dir "$1")
    [ -d "$sdir" ] || { echo "pg.sh: no data directory $sdir (./pg.sh init)" >&2; exit 1; }
    if postmaster_pid "$1" >/dev/null; then
        echo "node $1's server already runs" >&2
        return 0
    fi
    as_pg touch "$sdir/standby.signal"
    rm -f "$(promote_marker "$1")"
    as_pg "$PG_BIN/pg_ctl" -D "$sdir" -l "$sdir.log" -w -t 60 -s \
        -o "-p $3 -c listen_addresses=$2 -c cluster_name=node$1" start
}

case ${1:-} in
init)
    own_root
    for id in $all_ids; do
        [ ! -e "$(data_dir "$id")" ] || { echo "pg.sh: $(data_dir "$id") exists: remove $PG_ROOT first" >&2; exit 1; }
    done
    # shellcheck disable=SC2086 # the IDs split on purpose
    set -- $all_ids
    first=$1
    shift
    others="$*"
    dir=$(data_dir "$first")
    as_pg "$PG_BIN/initdb" -N -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
    # shellcheck disable=SC2016 # expanded by the inner sh
    as_pg sh -c 'cat >> "$1/postgresql.conf"' sh "$dir" < "$here/postgresql.conf"
    # shellcheck disable=SC2046 # "host port" splits on purpose
    set -- $(addr_for "$first")
    as_pg "$PG_BIN/pg_ctl" -D "$dir" -l "$dir.log" -w -t 60 -s \
        -o "-p $2 -c listen_addresses=$1 -c cluster_name=node$first" start
    for id in $others; do
        as_pg "$PG_BIN/pg_basebackup" -d "$(conninfo "$first" "node$id")" -D "$(data_dir "$id")" \
            -X stream -c fast -R --no-sync
        start "$id"
    done
    # Every standby streams from the first server now; its clean stop sends them its
    # last WAL (the shutdown checkpoint), so all three hold the same position.
    as_pg "$PG_BIN/pg_ctl" -D "$dir" -w -t 60 -s -m fast stop
    for id in $others; do
        as_pg "$PG_BIN/pg_ctl" -D "$(data_dir "$id")" -w -t 60 -s -m fast stop
    done
    echo "initialised node $first and $others under $PG_ROOT (start each: ./pg.sh start ID)"
    ;;
start)
    start "$BULLY_NODE_ID"
    ;;
stop)
    stop_pg "$BULLY_NODE_ID" fast
    ;;
kill)
    pid=$(postmaster_pid "$BULLY_NODE_ID") || { echo "node $BULLY_NODE_ID's server does not run"; exit 0; }
    # Each child of the postmaster leads a process group of its own: by parent PID.
    kill -9 "$pid"
    pkill -KILL -P "$pid" || true
    echo "killed node $BULLY_NODE_ID's server (pid $pid and its children)"
    ;;
status)
    for id in $all_ids; do
        if probe "$id"; then
            if [ "$in_recovery" = t ]; then
                role="standby ($wal_status from $sender, timeline $tli)"
            else
                role="PRIMARY (timeline $tli, epoch $epoch)"
            fi
            printf 'node %s: %s lsn=%s read_only=%s\n' "$id" "$role" "$lsn" "$ro"
        else
            echo "node $id: $probe_error"
        fi
    done
    ;;
*)
    echo "usage: $0 init | start ID | stop ID | kill ID | status" >&2
    exit 2
    ;;
esac
