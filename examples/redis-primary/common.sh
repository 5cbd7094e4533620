# Shared by the hook scripts and the health check; sourced, not run.
# Reads the node -> Redis map from $REDIS_NODES_FILE (default: nodes.conf beside this
# file) and gives: redis_of ID -> "host port", rcli ID ARGS... (redis-cli on that
# node's Redis), info_field NAME (a field of $info), log MESSAGE (to the node's log).

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
nodes_file=${REDIS_NODES_FILE:-$here/nodes.conf}
[ -r "$nodes_file" ] || { echo "redis-primary: cannot read $nodes_file" >&2; exit 2; }
: "${BULLY_NODE_ID:?run me from bully (BULLY_NODE_ID is not set)}"

redis_of() {
    awk -v id="$1" '$1 == id { print $2, $3; found = 1 } END { exit !found }' "$nodes_file"
}

other_ids() {
    awk -v id="$BULLY_NODE_ID" '$1 !~ /^#/ && NF >= 3 && $1 != id { print $1 }' "$nodes_file"
}

rcli() {
    addr=$(redis_of "$1") || { echo "redis-primary: node $1 is not in $nodes_file" >&2; return 2; }
    shift
    # shellcheck disable=SC2086 # "host port" splits on purpose
    set -- $addr "$@"
    host=$1 port=$2
    shift 2
    redis-cli -h "$host" -p "$port" "$@"
}

# info_field NAME: the value of "NAME:value" in $info (an INFO reply).
info_field() {
    printf '%s\n' "$info" | tr -d '\r' | sed -n "s/^$1://p"
}

log() {
    echo "redis-primary[node $BULLY_NODE_ID ${BULLY_HOOK:-health}]: $*" >&2
}
