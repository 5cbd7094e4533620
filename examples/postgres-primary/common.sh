# Shared by the hook scripts, the health check, fence.sh, rejoin.sh and pg.sh; sourced.
#
# Reads the node -> PostgreSQL map from $PG_NODES_FILE (default: nodes.conf beside this
# file: "ID HOST PORT" per line). Settings (environment, with defaults):
#   PG_ROOT        where the data directories live: $PG_ROOT/nodeID (./pg)
#   PG_BIN         PostgreSQL's programs (found: the directory of `pg_ctl` on the PATH,
#                  symlinks resolved, else /usr/lib/postgresql/15/bin, Debian's place)
#   PG_LISTEN      "host port" where this node's own server listens, when the other
#                  hosts reach it at another address (the nodes file's, e.g. through a
#                  proxy or NAT); default: the nodes file's
#   PG_USER        the OS user that owns the data directories and runs postgres when
#                  these scripts run as root (postgres): PostgreSQL refuses root
#   PG_TIMEOUT     seconds any one psql call on this node's server may take (1): a
#                  frozen (SIGSTOPped) or cut-off server accepts the connection and
#                  never answers, and no script may hang on it
#   PEER_TIMEOUT   the same for the other nodes' servers in on-elected.sh (0.5)
#   CATCH_UP_MS    how long on-elected.sh waits for this server to receive what a
#                  fresher standby or the fenced old primary holds (2000)
#   SYNC_COUNT     the N of synchronous_standby_names = 'ANY N (...)' (1)
#   STOP_MS        how long a fast shutdown may take before it becomes immediate (1000)
#   FOLLOW_MS      how long rejoin.sh waits for a repointed standby to stream (2000)
#   ALLOW_REINIT   1: rejoin.sh may re-clone a data directory pg_rewind cannot fix
#                  (moved aside, never deleted); default 0: refuse and log
#
# Gives: pg_of ID -> "host port", other_ids, sql ID QUERY (psql on that node's
# server, one row, fields separated by spaces), probe ID (in_recovery, lsn, ro, epoch,
# wal_status, sender, tli of that server, in one query), peer CMD... (CMD with
# PEER_TIMEOUT), as_pg CMD... (as the owner of the data directories), data_dir ID,
# is_fresher, postmaster_pid ID, stop_pg ID fast|immediate, promoted_token / remember_promoted,
# coordinator_promoted, log MESSAGE (to the node's log), now_ms.

here=$(CDPATH="" cd -- "$(dirname -- "$0")" && pwd)
nodes_file=${PG_NODES_FILE:-$here/nodes.conf}
[ -r "$nodes_file" ] || { echo "postgres-primary: cannot read $nodes_file" >&2; exit 2; }
: "${BULLY_NODE_ID:?run me from bully (BULLY_NODE_ID is not set)}"
PG_ROOT=${PG_ROOT:-$here/pg}
PG_USER=${PG_USER:-postgres}
PG_TIMEOUT=${PG_TIMEOUT:-1}
PEER_TIMEOUT=${PEER_TIMEOUT:-0.5}
CATCH_UP_MS=${CATCH_UP_MS:-2000}
SYNC_COUNT=${SYNC_COUNT:-1}
STOP_MS=${STOP_MS:-1000}
FOLLOW_MS=${FOLLOW_MS:-2000}
ALLOW_REINIT=${ALLOW_REINIT:-0}
call_timeout=$PG_TIMEOUT # what the next psql may take; see peer

if [ -z "${PG_BIN:-}" ]; then
    if found=$(command -v pg_ctl 2>/dev/null); then
        PG_BIN=$(dirname -- "$(readlink -f -- "$found")")
    else
        PG_BIN=/usr/lib/postgresql/15/bin
    fi
fi
[ -x "$PG_BIN/pg_ctl" ] || { echo "postgres-primary: no pg_ctl in $PG_BIN (apt-get install postgresql-15, or set PG_BIN)" >&2; exit 2; }

log() {
    echo "postgres-primary[node $BULLY_NODE_ID ${BULLY_HOOK:-health}]: $*" >&2
}

# The map, read once with shell builtins: addr_ID="host port", all_ids in file order.
all_ids=""
while read -r id host port _; do
    case $id in '' | \#* | *[!0-9]*) continue ;; esac
    [ -n "$port" ] || continue
    eval "addr_$id=\"\$host \$port\""
    all_ids="$all_ids $id"
done < "$nodes_file"
node_count=$(echo "$all_ids" | wc -w)

pg_of() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    eval "[ -n \"\${addr_$1:-}\" ] && echo \"\$addr_$1\""
}

# addr_for ID: where this host reaches node ID's server: $PG_LISTEN ("host port", where
# this node's own server listens) for this node when set, else the nodes file. The
# nodes file says how the OTHER hosts reach a server (primary_conninfo, pg_rewind).
addr_for() {
    if [ "$1" = "$BULLY_NODE_ID" ] && [ -n "${PG_LISTEN:-}" ]; then
        echo "$PG_LISTEN"
    else
        pg_of "$1"
    fi
}

other_ids() {
    for id in $all_ids; do
        [ "$id" = "$BULLY_NODE_ID" ] || echo "$id"
    done
}

data_dir() {
    echo "$PG_ROOT/node$1"
}

# as_pg CMD...: runs CMD as the owner of the data directories: $PG_USER when we are
# root (initdb, pg_ctl, pg_rewind and postgres refuse root), else ourselves. From /,
# which every user may enter.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        (cd / && exec runuser -u "$PG_USER" -- "$@")
    else
        (cd / && exec "$@")
    fi
}

# conninfo ID [APP] [local]: a libpq connection string for node ID's server, as the
# other hosts reach it (primary_conninfo, pg_rewind's source), or as this host does
# ("local").
conninfo() {
    if [ "${3:-}" = local ]; then where=$(addr_for "$1"); else where=$(pg_of "$1"); fi
    # shellcheck disable=SC2086 # "host port" splits on purpose
    set -- $where "${2:-bully-scripts}"
    [ -n "${2:-}" ] || return 2
    echo "host=$1 port=$2 user=postgres dbname=postgres connect_timeout=2 application_name=$3"
}

# sql ID QUERY...: one psql call on node ID's server, each QUERY sent on its own (ALTER
# SYSTEM refuses a transaction block), bounded by $call_timeout seconds; prints the
# rows unaligned, fields separated by a space.
sql() {
    info=$(conninfo "$1" bully-scripts local) || { echo "node $1 is not in $nodes_file"; return 2; }
    shift
    for q in "$@"; do
        set -- "$@" -c "$q"
        shift
    done
    timeout -k 1 "$call_timeout" "$PG_BIN/psql" -X -q -A -t -F ' ' -v ON_ERROR_STOP=1 \
        -d "$info" "$@" 2>&1
}

# peer CMD...: CMD with the shorter PEER_TIMEOUT.
peer() {
    call_timeout=$PEER_TIMEOUT
    set +e
    "$@"
    rc=$?
    set -e
    call_timeout=$PG_TIMEOUT
    return $rc
}

# probe ID: reads node ID's server in one query. Sets in_recovery (t/f), lsn (the WAL
# position as a decimal: written on a primary, the greater of received and replayed on
# a standby), ro (default_transaction_read_only), epoch (bully.epoch, the token
# on-elected.sh stored when it promoted that server, 0 if none), wal_status and sender
# ("host:port") of its WAL receiver, and tli (its timeline; on a standby the newest
# timeline it holds WAL of: the highest in its WAL segments' names, which a standby
# writes only for a timeline it actually follows; not the receiver's, gone when the
# upstream is, nor the last restartpoint's, minutes old).
# Returns 1 with the reason in $probe_error when it does not answer.
probe() {
    in_recovery="" lsn=0 ro="" epoch=0 wal_status="" sender="" tli=0
    out=$(sql "$1" "SELECT pg_is_in_recovery(),
        pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery()
            THEN greatest(coalesce(pg_last_wal_receive_lsn(), '0/0'), coalesce(pg_last_wal_replay_lsn(), '0/0'))
            ELSE pg_current_wal_lsn() END, '0/0')::bigint,
        current_setting('default_transaction_read_only'),
        coalesce(nullif(current_setting('bully.epoch', true), ''), '0'),
        coalesce((SELECT status || ' ' || coalesce(sender_host, '-') || ':' || coalesce(sender_port, 0) || ' ' || received_tli
                  FROM pg_stat_wal_receiver), '- -:0 0'),
        CASE WHEN pg_is_in_recovery() THEN coalesce((SELECT max(('x' || substr(name, 1, 8))::bit(32)::int)
                FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'), 1)
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END") || true
    # shellcheck disable=SC2086 # the row's fields
    set -- $out
    case ${1:-}:${2:-} in
    t:[0-9]* | f:[0-9]*) ;;
    *)
        probe_error=${out:-no answer within $call_timeout s}
        probe_error=$(printf '%s' "$probe_error" | tr '\n' ' ')
        return 1
        ;;
    esac
    in_recovery=$1 lsn=$2 ro=$3 epoch=$4 wal_status=$5 sender=$6 tli=$8
}

# is_fresher "T1 L1" "T2 L2": whether data on timeline T1 at WAL position L1 is newer
# than on T2 at L2: a higher timeline (a later promotion) first, then a higher position.
# Positions alone mislead: an old primary's unacknowledged tail on its old timeline
# can lie past the new primary's position.
is_fresher() {
    # shellcheck disable=SC2086 # two words each, on purpose
    set -- $1 $2
    [ "$1" -gt "$3" ] || { [ "$1" -eq "$3" ] && [ "$2" -gt "$4" ]; }
}

# postmaster_pid ID: the PID of node ID's running postmaster (local servers only).
postmaster_pid() {
    pid=$(head -n 1 "$(data_dir "$1")/postmaster.pid" 2>/dev/null) || return 1
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# stop_pg ID fast|immediate [WAIT_MS]: stops node ID's local server by signal. fast
# (SIGINT: new connections refused and sessions ended at once, then a shutdown
# checkpoint the standbys still receive) becomes immediate (SIGQUIT: no checkpoint,
# crash recovery on the next start) after $STOP_MS. Returns once the postmaster is
# gone, or 1 after WAIT_MS (5000) more: a SIGSTOPped server keeps both signals pending
# and acts on them the moment it is continued.
stop_pg() {
    pid=$(postmaster_pid "$1") || return 0
    if [ "$2" = fast ]; then
        kill -INT "$pid" 2>/dev/null || true
        deadline=$(($(now_ms) + STOP_MS))
        while kill -0 "$pid" 2>/dev/null && [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.02; done
    fi
    kill -QUIT "$pid" 2>/dev/null || true
    deadline=$(($(now_ms) + ${3:-5000}))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
}

# The token of the epoch on-elected.sh last promoted this node's server for, in the
# bully data dir (the keeper's fence gets BULLY_DATA_DIR too): a late fence for an
# older epoch leaves a server promoted since alone, and the coordinator's health check
# fails once its server runs in recovery after that promotion (it restarted).
promoted_file() {
    echo "${BULLY_DATA_DIR:?}/pg-promoted"
}

promoted_token() {
    t=$(cat "$(promoted_file)" 2>/dev/null) || t=0
    case $t in '' | *[!0-9]*) t=0 ;; esac
    echo "$t"
}

remember_promoted() {
    printf '%s\n' "$1" > "$(promoted_file).tmp" && mv "$(promoted_file).tmp" "$(promoted_file)"
}

# coordinator_promoted: whether node $BULLY_COORDINATOR's server is a primary promoted
# for this epoch or a newer one (bully.epoch >= $BULLY_EPOCH): only then may a standby
# follow it or be rewound from it. Overwrites the probe variables; sets follow_status.
coordinator_promoted() {
    if ! peer probe "$BULLY_COORDINATOR"; then
        follow_status="node $BULLY_COORDINATOR's server does not answer ($probe_error)"
        return 1
    fi
    if [ "$in_recovery" != f ] || [ "$epoch" -lt "${BULLY_EPOCH:?}" ]; then
        follow_status="node $BULLY_COORDINATOR's server is not promoted for epoch $BULLY_EPOCH yet"
        return 1
    fi
}

# promote_marker ID: a file beside node ID's data directory, there from the moment
# on-elected.sh asks the server to promote until pg.sh starts it again (as a standby).
# fence.sh and on-demoted.sh stop the server unless it is a standby never asked to
# promote: stopping an innocent standby could leave no server to promote.
promote_marker() {
    echo "$(data_dir "$1").promote-requested"
}

# innocent_standby ID: node ID's server is a standby (standby.signal) that no
# on-elected.sh asked to promote since it started.
innocent_standby() {
    [ -e "$(data_dir "$1")/standby.signal" ] && [ ! -e "$(promote_marker "$1")" ]
}

# start_rejoin: runs rejoin.sh for this node in the background, in a session of its
# own (a hook or check past its timeout is killed with its process group, and a
# pg_rewind killed halfway leaves a data directory only a new clone can fix). Only one
# runs at a time (rejoin.sh takes a lock). Its output goes to $PG_ROOT/nodeID.rejoin.log.
start_rejoin() {
    setsid "$here/rejoin.sh" < /dev/null >> "$(data_dir "$BULLY_NODE_ID").rejoin.log" 2>&1 &
}

# rejoining: whether rejoin.sh runs for this node now (it holds the lock).
rejoining() {
    ! flock -n "$(data_dir "$BULLY_NODE_ID").rejoin.lock" true 2>/dev/null
}

# now_ms: wall-clock milliseconds (GNU date), for bounded waits.
now_ms() {
    date +%s%3N
}
