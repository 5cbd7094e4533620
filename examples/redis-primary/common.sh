# Shared by the hook scripts and the health check; sourced, not run.
#
# Reads the node -> Redis map from $REDIS_NODES_FILE (default: nodes.conf beside this
# file). Settings (environment, with defaults):
#   REDIS_PASSWORD_FILE  the Redis password (requirepass/masterauth), one line; default
#                        ./password beside this file if it exists, else no auth
#   MAX_LAG_BYTES        how far behind its primary a replica may be and still be
#                        eligible (65536); on_elected catches up the rest before it
#                        promotes, so this only decides how soon a replica may lead
#   PAUSE_MS             how long a fenced or demoted Redis refuses writes at most
#                        (30000); on_change lifts it once the Redis is a replica
#   CATCH_UP_MS          how long on_elected waits for its Redis to catch up with the
#                        fenced old primary (2000)
#   REDIS_TIMEOUT        seconds any one redis-cli call may take before it is killed
#                        (1): a frozen (SIGSTOPped) or cut-off Redis accepts the
#                        connection and never answers, and no script may hang on it
#   PEER_TIMEOUT         the same, for on_elected's calls to the other nodes' Redis
#                        servers (0.5): the old primary may be frozen or cut off, and
#                        its keeper fences it anyway, so the new primary does not wait
#                        long for it
#   NO_PRIMARY           "HOST PORT" of redis.conf's `replicaof` (127.0.0.1 1): a
#                        replica of it follows no one yet (it just started)
#
# Gives: redis_of ID -> "host port", other_ids, rcli ID ARGS... (redis-cli on that
# node's Redis), redis_at HOST PORT ARGS... (on any Redis), probe ID (reads a Redis: its
# role, replication offset and the epoch of its data, in one INFO), peer CMD... (CMD
# with PEER_TIMEOUT), is_fresher, no_primary, check_version, repoint ID PRIMARY,
# follow_coordinator, log MESSAGE (to the node's log).
# Hooks run on every failover, so each probe costs one redis-cli and one awk.

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
nodes_file=${REDIS_NODES_FILE:-$here/nodes.conf}
[ -r "$nodes_file" ] || { echo "redis-primary: cannot read $nodes_file" >&2; exit 2; }
: "${BULLY_NODE_ID:?run me from bully (BULLY_NODE_ID is not set)}"
MAX_LAG_BYTES=${MAX_LAG_BYTES:-65536}
PAUSE_MS=${PAUSE_MS:-30000}
CATCH_UP_MS=${CATCH_UP_MS:-2000}
REDIS_TIMEOUT=${REDIS_TIMEOUT:-1}
PEER_TIMEOUT=${PEER_TIMEOUT:-0.5}
NO_PRIMARY=${NO_PRIMARY:-127.0.0.1 1}
call_timeout=$REDIS_TIMEOUT # what the next redis-cli may take; see peer

if [ -z "${REDIS_PASSWORD_FILE:-}" ] && [ -f "$here/password" ]; then
    REDIS_PASSWORD_FILE=$here/password
fi
if [ -n "${REDIS_PASSWORD_FILE:-}" ]; then
    [ -r "$REDIS_PASSWORD_FILE" ] || {
        echo "redis-primary: cannot read the password file $REDIS_PASSWORD_FILE" >&2
        exit 2
    }
    # redis-cli reads it from the environment: no password on any command line.
    REDISCLI_AUTH=$(head -n 1 "$REDIS_PASSWORD_FILE")
    export REDISCLI_AUTH
fi

log() {
    echo "redis-primary[node $BULLY_NODE_ID ${BULLY_HOOK:-health}]: $*" >&2
}

# The map, read once with shell builtins (hooks run on every failover: no process
# per lookup): addr_ID="host port" for every node, all_ids in file order.
all_ids=""
while read -r id host port _; do
    case $id in '' | \#* | *[!0-9]*) continue ;; esac
    [ -n "$port" ] || continue
    eval "addr_$id=\"\$host \$port\""
    all_ids="$all_ids $id"
done < "$nodes_file"

redis_of() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    eval "[ -n \"\${addr_$1:-}\" ] && echo \"\$addr_$1\""
}

other_ids() {
    for id in $all_ids; do
        [ "$id" = "$BULLY_NODE_ID" ] || echo "$id"
    done
}

rcli() {
    case $1 in '' | *[!0-9]*) addr="" ;; *) eval "addr=\${addr_$1:-}" ;; esac
    [ -n "$addr" ] || { echo "redis-primary: node $1 is not in $nodes_file" >&2; return 2; }
    shift
    # shellcheck disable=SC2086 # "host port" splits on purpose
    set -- $addr "$@"
    redis_at "$@"
}

# redis_at HOST PORT ARGS...: redis-cli on any Redis, killed after $call_timeout
# seconds (coreutils timeout; exit 124 then, with no output).
redis_at() {
    host=$1 port=$2
    shift 2
    timeout "$call_timeout" redis-cli -h "$host" -p "$port" "$@"
}

# peer CMD ARGS...: runs CMD (probe, rcli, repoint) with the shorter PEER_TIMEOUT per
# redis-cli call: for another node's Redis, which may be frozen or cut off.
peer() {
    call_timeout=$PEER_TIMEOUT
    if "$@"; then peer_status=0; else peer_status=$?; fi
    call_timeout=$REDIS_TIMEOUT
    return "$peer_status"
}

# probe ID: reads node ID's Redis with one INFO (and GET bully:epoch) into the
# variables role, link (master_link_status, empty on a primary), syncing (1 while a
# full sync loads), mhost/mport (its primary), offset (master_repl_offset), epoch (the
# fencing token of the primary whose data it holds, 0 for none), keys, version and
# run_id. Fails, with the reason in $probe_error, when the Redis cannot be reached, does
# not answer within $call_timeout s (frozen) or refuses us (NOAUTH, WRONGPASS): such a
# Redis vouches for nothing.
probe() {
    role="" link="" syncing=0 mhost="" mport="" offset=0 epoch=0 keys=0 version="" run_id=""
    parsed=$(printf 'INFO\nGET bully:epoch\n' | rcli "$1" 2>&1 | awk -F: -v limit="$call_timeout" '
        { sub(/\r$/, "") }
        NR == 1 { first = $0 }
        /^role:/ { role = $2 }
        /^master_link_status:/ { link = $2 }
        /^master_sync_in_progress:/ { syncing = $2 }
        /^master_host:/ { mhost = $2 }
        /^master_port:/ { mport = $2 }
        /^master_repl_offset:/ { offset = $2 }
        /^redis_version:/ { version = $2 }
        /^run_id:/ { run_id = $2 }
        /^db[0-9]+:keys=/ { split($2, kv, /[=,]/); keys += kv[2] }
        { last = $0 }
        END {
            if (first == "") first = "no answer within " limit " s"
            if (role == "") { gsub(/\047/, "", first); printf "probe_error=\047%s\047\n", first; exit 1 }
            if (last !~ /^[0-9]+$/) last = 0
            printf "role=%s link=%s syncing=%d mhost=%s mport=%s offset=%d epoch=%d keys=%d version=%s run_id=%s\n",
                role, link, syncing, mhost, mport, offset, last, keys, version, run_id
        }') || {
        eval "$parsed"
        probe_error=${probe_error:-no answer}
        return 1
    }
    eval "$parsed"
}

# is_fresher "E1 O1" "E2 O2": whether data at epoch E1, replication offset O1 is newer
# than data at E2, O2 (a higher epoch, the token of the primary that wrote it, then a
# higher offset).
is_fresher() {
    # shellcheck disable=SC2086 # two words each, on purpose
    set -- $1 $2
    [ "$1" -gt "$3" ] || { [ "$1" -eq "$3" ] && [ "$2" -gt "$4" ]; }
}

# check_version: CLIENT PAUSE ... WRITE, which fencing relies on, needs Redis 6.2.
check_version() {
    major=${version%%.*}
    rest=${version#*.}
    minor=${rest%%.*}
    case $major$minor in '' | *[!0-9]*) major=0 minor=0 ;; esac
    if [ "$major" -lt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -lt 2 ]; }; then
        log "Redis ${version:-of unknown version} is too old: these scripts need Redis >= 6.2 (CLIENT PAUSE WRITE)"
        return 1
    fi
}

# repoint ID PRIMARY: makes node ID's Redis a replica of node PRIMARY's, in the safe
# order: pause writes, REPLICAOF, lift the pause (one redis-cli, so the pause lasts as
# long as the REPLICAOF): a Redis that was a primary never acknowledges a write that
# the resync then discards.
repoint() {
    target=$(redis_of "$2") || return 2
    reply=$(printf '%s\n' "CLIENT PAUSE $PAUSE_MS WRITE" "REPLICAOF $target" "CLIENT UNPAUSE" \
        | rcli "$1" 2>&1)
    case $(printf '%s\n' "$reply" | sed -n 2p) in
    OK*) ;;
    *) log "REPLICAOF $target on node $1's Redis failed: $reply"; return 1 ;;
    esac
}

# no_primary HOST PORT: whether a replica of HOST:PORT follows no one: redis.conf
# starts every Redis as a replica of $NO_PRIMARY, a closed port, so a restarted Redis
# never serves its (empty) data set to the replicas that reconnect to it.
no_primary() {
    [ "$1 $2" = "$NO_PRIMARY" ]
}

# follow_coordinator: (a follower) makes this node's Redis replicate from the
# coordinator's, but only once the coordinator's on_elected has promoted that Redis for
# this epoch (bully:epoch >= $BULLY_EPOCH): before that, it may still be catching up,
# and replicating from it could discard newer data this Redis holds. Never waits.
# Returns 0 once repointed; 1, with the reason in $follow_status, when the coordinator's
# Redis does not answer or is not promoted yet (its on_elected repoints every Redis it
# reaches once it has promoted its own). Overwrites the probe variables.
follow_coordinator() {
    if ! peer probe "$BULLY_COORDINATOR"; then
        follow_status="node $BULLY_COORDINATOR's Redis does not answer ($probe_error)"
        return 1
    fi
    if [ "$role" != master ] || [ "$epoch" -lt "${BULLY_EPOCH:?}" ]; then
        follow_status="node $BULLY_COORDINATOR's Redis is not promoted for epoch $BULLY_EPOCH yet"
        return 1
    fi
    repoint "$BULLY_NODE_ID" "$BULLY_COORDINATOR"
}

# The run_id of the Redis process on_elected last promoted on this node, in the data
# dir: the coordinator's health check fails once its Redis is another process (it
# restarted: empty, or from an old RDB file), so bully hands the office to a node whose
# Redis holds the data.
promoted_file() {
    echo "${BULLY_DATA_DIR:?}/redis-promoted"
}

promoted_run_id() {
    cat "$(promoted_file)" 2>/dev/null || true
}

remember_promoted() {
    printf '%s\n' "$1" > "$(promoted_file).tmp" && mv "$(promoted_file).tmp" "$(promoted_file)"
}

# now_ms: wall-clock milliseconds (GNU date), for bounded waits.
now_ms() {
    date +%s%3N
}
