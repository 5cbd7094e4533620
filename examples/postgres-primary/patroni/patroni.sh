#!/usr/bin/env bash
# Patroni 4.1 + etcd 3.4 + three PostgreSQL 15 + HAProxy on loopback: the other side of
# the side-by-side comparison with bully (issues 29, 39). Configs and scripts only;
# install.sh here puts Patroni 4.1 in a venv (target/patroni-venv) and etcd in place.
#
#   patroni.sh start [--timing default|tight]   start (or resume) the cluster, wait until
#                                               it is healthy (bounded by PT_START_TIMEOUT)
#   patroni.sh stop [--kill]                    stop exactly what this base dir started (by
#                                               PID; --kill: kill -9 the nodes, no shutdown)
#   patroni.sh status                           one line per node, then primary=N
#   patroni.sh primary [--wait SECS]            the current primary's node number
#   patroni.sh pids N                           patroni=PID postgres=PID children="PIDs"
#   patroni.sh wait-healthy [SECS]              one primary, the standbys (PT_SYNC_MODE on: one
#                                               sync standby, one replica; quorum: two quorum
#                                               standbys), a write through HAProxy commits
#   patroni.sh kill N                           kill -9 node N's host: patroni, postmaster
#                                               and every postgres child (frozen first)
#   patroni.sh pause N patroni|postgres|all     SIGSTOP (postgres = postmaster + children)
#   patroni.sh resume N patroni|postgres|all    SIGCONT the very PIDs paused
#   patroni.sh cut N | heal N                   node N's etcd proxy forwards nothing / again
#   patroni.sh restart N                        start node N's Patroni again (after kill)
#   patroni.sh timing default|tight             apply a timing to the running cluster
#
# Environment (read by start; later commands read $PT_BASE/ports.env written by start):
#   PT_BASE          base dir (default ./run under this folder); everything lives there
#   PT_PORT_BASE     default 15400; the ports below default to PT_PORT_BASE + offset
#   PT_HAPROXY_PORT  +0   clients write here (routed to GET /primary == 200)
#   PT_ETCD_PORT     +1   etcd client port;  PT_ETCD_PEER_PORT +2
#   PT_PG_PORT{1,2,3}     +11..+13  PostgreSQL of node N
#   PT_API_PORT{1,2,3}    +21..+23  Patroni REST API of node N
#   PT_PROXY_PORT{1,2,3}  +31..+33  node N's cut proxy in front of etcd
#   PT_PG_USER       the unprivileged user PostgreSQL and Patroni run as when this
#                    script runs as root (default postgres, from Debian's postgresql)
#   PT_PG_BIN        PostgreSQL 15 binaries (default: /usr/lib/postgresql/15/bin, else
#                    the directory of pg_ctl on the PATH)
#   PT_START_TIMEOUT seconds start and wait-healthy wait for health (default 120)
#   PT_PATRONI       the patroni program (default: target/patroni-venv/bin/patroni in the
#                    repository, from install.sh; else patroni on the PATH)
#   PT_DCS           etcd3 (default: the v3 API) or etcd (the v2 API; etcd runs with
#                    --enable-v2). Patroni 3.0.2's etcd3 code overwrote the leader key
#                    unconditionally (fixed in 3.0.3) and lost acknowledged commits after
#                    a stalled primary woke up: see README.md
#   PT_SYNC_STRICT   true: synchronous_mode_strict (commits block while no sync standby);
#                    default false (a new cluster only: it goes into bootstrap.dcs)
#   PT_SYNC_MODE     on (default): synchronous_mode: on, one named synchronous standby
#                    (synchronous_standby_names = 'node2'); quorum: Patroni 4's
#                    synchronous_mode: quorum with synchronous_node_count: 1, both standbys
#                    in 'ANY 1 (node2,node3)' and a /sync quorum of 1 (a new cluster only:
#                    it goes into bootstrap.dcs)
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)

die() { echo "patroni.sh: $*" >&2; exit 1; }
now() { date +%s.%N; }
# deadline SECS -> the epoch second at which a wait ends
deadline() { echo $(( $(date +%s) + ${1%.*} )); }
before() { [ "$(date +%s)" -lt "$1" ]; }

BASE=${PT_BASE:-$here/run}
mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd)
RUN=$BASE/pids

load_ports() {
    if [ -f "$BASE/ports.env" ]; then
        # shellcheck disable=SC1091
        . "$BASE/ports.env"
        SYNC_STRICT=${SYNC_STRICT:-false}
        SYNC_MODE=${SYNC_MODE:-on}
        DCS=${DCS:-etcd3}
        PATRONI=${PATRONI:-patroni}
        return
    fi
    local b=${PT_PORT_BASE:-15400}
    HAPROXY_PORT=${PT_HAPROXY_PORT:-$b}
    ETCD_PORT=${PT_ETCD_PORT:-$((b + 1))}
    ETCD_PEER_PORT=${PT_ETCD_PEER_PORT:-$((b + 2))}
    PG_PORT1=${PT_PG_PORT1:-$((b + 11))}; PG_PORT2=${PT_PG_PORT2:-$((b + 12))}; PG_PORT3=${PT_PG_PORT3:-$((b + 13))}
    API_PORT1=${PT_API_PORT1:-$((b + 21))}; API_PORT2=${PT_API_PORT2:-$((b + 22))}; API_PORT3=${PT_API_PORT3:-$((b + 23))}
    # shellcheck disable=SC2034 # the three below are read indirectly (proxy_port, save_ports)
    {
        PROXY_PORT1=${PT_PROXY_PORT1:-$((b + 31))}
        PROXY_PORT2=${PT_PROXY_PORT2:-$((b + 32))}
        PROXY_PORT3=${PT_PROXY_PORT3:-$((b + 33))}
    }
    case ${PT_DCS:-etcd3} in etcd3 | etcd) DCS=${PT_DCS:-etcd3} ;; *) die "PT_DCS must be etcd3 or etcd (got '$PT_DCS')" ;; esac
    case ${PT_SYNC_STRICT:-false} in true | 1 | yes) SYNC_STRICT=true ;; *) SYNC_STRICT=false ;; esac
    case ${PT_SYNC_MODE:-on} in on | quorum) SYNC_MODE=${PT_SYNC_MODE:-on} ;; *) die "PT_SYNC_MODE must be on or quorum (got '$PT_SYNC_MODE')" ;; esac
    if [ -n "${PT_PATRONI:-}" ]; then PATRONI=$PT_PATRONI
    elif [ -x "$here/../../../target/patroni-venv/bin/patroni" ]; then
        PATRONI=$(cd "$here/../../../target/patroni-venv/bin" && pwd)/patroni
    else PATRONI=$(command -v patroni || echo patroni); fi
    if [ "$(id -u)" = 0 ]; then PG_USER=${PT_PG_USER:-postgres}; else PG_USER=$(id -un); fi
    if [ -n "${PT_PG_BIN:-}" ]; then PG_BIN=$PT_PG_BIN
    elif [ -x /usr/lib/postgresql/15/bin/postgres ]; then PG_BIN=/usr/lib/postgresql/15/bin
    elif command -v pg_ctl >/dev/null; then PG_BIN=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
    else PG_BIN=; fi
}
save_ports() {
    {
        for v in HAPROXY_PORT ETCD_PORT ETCD_PEER_PORT PG_PORT1 PG_PORT2 PG_PORT3 API_PORT1 API_PORT2 \
            API_PORT3 PROXY_PORT1 PROXY_PORT2 PROXY_PORT3 PG_USER PG_BIN SYNC_STRICT SYNC_MODE DCS PATRONI; do
            printf '%s=%q\n' "$v" "${!v}"
        done
    } > "$BASE/ports.env"
}
pg_port() { local v=PG_PORT$1; echo "${!v}"; }
api_port() { local v=API_PORT$1; echo "${!v}"; }
proxy_port() { local v=PROXY_PORT$1; echo "${!v}"; }
node_ok() { case ${1:-} in 1 | 2 | 3) ;; *) die "node must be 1, 2 or 3 (got '${1:-}')" ;; esac; }

# alive NAME: the process recorded in pids/NAME.pid runs
alive() { [ -s "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
pidof_rec() { cat "$RUN/$1.pid" 2>/dev/null || true; }

# postmaster_pid N: the postmaster of node N (first line of its postmaster.pid) if it
# runs and really is that data dir's postmaster, else nothing
postmaster_pid() {
    local f=$BASE/node$1/data/postmaster.pid pid
    [ -r "$f" ] || return 0
    pid=$(head -n 1 "$f" 2>/dev/null || true)
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$BASE/node$1/data" && echo "$pid"
    return 0
}
children_of() { ps -o pid= --ppid "$1" 2>/dev/null | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }

as_pg() { # run a command as the PostgreSQL user (exec: the PID stays the same)
    if [ "$(id -u)" = 0 ]; then
        exec setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- env -i PATH="$PATH" HOME="$BASE" LANG=C.UTF-8 "$@"
    else
        # a clean environment: Patroni reads every PATRONI_* variable as configuration
        exec env -i PATH="$PATH" HOME="$BASE" LANG=C.UTF-8 "$@"
    fi
}

# timing NAME -> "ttl loop_wait retry_timeout"
timing_values() {
    case $1 in
    default) echo "30 10 10" ;;
    tight) echo "20 1 3" ;;
    *) die "--timing must be default or tight (got '$1')" ;;
    esac
}

# the bootstrap.dcs lines of PT_SYNC_MODE
sync_mode_config() {
    if [ "$SYNC_MODE" = quorum ]; then
        echo "    synchronous_mode: quorum       # ANY 1 (both standbys); a quorum of them may promote"
        echo "    synchronous_node_count: 1"
    else
        echo "    synchronous_mode: true         # one named sync standby; only it may be promoted"
    fi
}

write_patroni_config() { # N TTL LOOP RETRY
    local n=$1 dir=$BASE/node$1
    cat > "$dir/patroni.yml" <<EOF
# written by patroni.sh start; node $n of scope "bench"
scope: bench
name: node$n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(api_port "$n")
  connect_address: 127.0.0.1:$(api_port "$n")
$DCS:   # etcd3: the v3 API; etcd: the v2 API (PT_DCS)
  hosts: 127.0.0.1:$(proxy_port "$n")
  use_proxies: true        # talk only to this node's cut proxy, never discover etcd's own URL
bootstrap:
  dcs:
    ttl: $2
    loop_wait: $3
    retry_timeout: $4
    maximum_lag_on_failover: 1048576
$(sync_mode_config)
    synchronous_mode_strict: $SYNC_STRICT
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - data-checksums
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $dir/data
  bin_dir: $PG_BIN
  pgpass: $dir/pgpass
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: postgres, password: postgres}
  pg_hba:   # loopback only, a benchmark: trust
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: $dir
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

write_haproxy_config() {
    cat > "$BASE/haproxy.cfg" <<EOF
# written by patroni.sh start: clients connect to 127.0.0.1:$HAPROXY_PORT and reach the
# PostgreSQL whose Patroni answers GET /primary with 200. Tuned like
# examples/redis-primary/haproxy.cfg (inter 100 ms, fall 1, rise 1, shutdown-sessions).
global
    maxconn 1024
defaults
    mode tcp
    timeout connect 100ms
    timeout client 60s
    timeout server 60s
    timeout check 200ms
    retries 2
    option redispatch 1
frontend postgres
    bind 127.0.0.1:$HAPROXY_PORT
    default_backend postgres_primary
backend postgres_primary
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 100 fastinter 100 downinter 100 fall 1 rise 1 on-marked-down shutdown-sessions
    server node1 127.0.0.1:$PG_PORT1 check port $API_PORT1
    server node2 127.0.0.1:$PG_PORT2 check port $API_PORT2
    server node3 127.0.0.1:$PG_PORT3 check port $API_PORT3
EOF
}

start_etcd() {
    alive etcd && return 0
    mkdir -p "$BASE/etcd"
    etcd --name bench-etcd --data-dir "$BASE/etcd/data" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "bench-etcd=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new --enable-v2=true \
        >> "$BASE/etcd/etcd.log" 2>&1 &
    echo $! > "$RUN/etcd.pid"
    local end; end=$(deadline 30)
    until curl -fsS -m 1 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; do
        alive etcd || die "etcd exited: see $BASE/etcd/etcd.log (port $ETCD_PORT or $ETCD_PEER_PORT taken?)"
        before "$end" || die "etcd not healthy after 30 s: see $BASE/etcd/etcd.log"
        sleep 0.1
    done
}

start_proxy() { # N
    alive "proxy$1" && return 0
    "$PY" "$here/cutproxy.py" "$(proxy_port "$1")" "$ETCD_PORT" "$RUN/proxy$1.state" >> "$BASE/proxy$1.log" 2>&1 &
    echo $! > "$RUN/proxy$1.pid"
    local end; end=$(deadline 10)
    until [ -s "$RUN/proxy$1.state" ] && curl -fsS -m 1 "http://127.0.0.1:$(proxy_port "$1")/health" >/dev/null 2>&1; do
        alive "proxy$1" || die "cut proxy $1 exited: see $BASE/proxy$1.log (port $(proxy_port "$1") taken?)"
        before "$end" || die "cut proxy $1 does not forward after 10 s: see $BASE/proxy$1.log"
        sleep 0.1
    done
}

start_patroni() { # N
    alive "patroni$1" && return 0
    local dir=$BASE/node$1
    (as_pg "$PATRONI" "$dir/patroni.yml" >> "$dir/patroni.log" 2>&1) &
    echo $! > "$RUN/patroni$1.pid"
}

start_haproxy() {
    alive haproxy && return 0
    haproxy -f "$BASE/haproxy.cfg" -db >> "$BASE/haproxy.log" 2>&1 &
    echo $! > "$RUN/haproxy.pid"
}

# role N -> Patroni's role for node N (primary/replica/...) or "down"
node_json() { curl -fsS -m 1 "http://127.0.0.1:$(api_port "$1")/patroni" 2>/dev/null || true; }

cluster_json() {
    local n j
    for n in 1 2 3; do
        j=$(curl -fsS -m 1 "http://127.0.0.1:$(api_port "$n")/cluster" 2>/dev/null || true)
        [ -n "$j" ] && { echo "$j"; return 0; }
    done
    return 1
}

current_primary() { # prints N when exactly one node's REST answers GET /primary with 200
    local n found=
    for n in 1 2 3; do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' -m 1 "http://127.0.0.1:$(api_port "$n")/primary" 2>/dev/null)" = 200 ]; then
            [ -n "$found" ] && { echo "two"; return 0; }
            found=$n
        fi
    done
    echo "$found"
}

healthy() { # one leader running, the standbys streaming/running (on: one sync_standby and
    # one replica; quorum: two quorum_standby), a write commits
    local j sync=1 quorum=0 replica=1
    [ "$SYNC_MODE" = quorum ] && { sync=0 quorum=2 replica=0; }
    j=$(cluster_json) || return 1
    echo "$j" | jq -e --argjson s "$sync" --argjson q "$quorum" --argjson r "$replica" \
        '[.members[] | select(.state == "running" or .state == "streaming")] as $m
        | ([$m[] | select(.role == "leader")] | length) == 1
        and ([$m[] | select(.role == "sync_standby")] | length) == $s
        and ([$m[] | select(.role == "quorum_standby")] | length) == $q
        and ([$m[] | select(.role == "replica")] | length) == $r' >/dev/null 2>&1 || return 1
    PGCONNECT_TIMEOUT=2 psql -X -q -h 127.0.0.1 -p "$HAPROXY_PORT" -U postgres -d postgres -tA \
        -c "SET statement_timeout = '3s'; CREATE TABLE IF NOT EXISTS patroni_sh_probe(at timestamptz); INSERT INTO patroni_sh_probe VALUES (now())" \
        >/dev/null 2>&1
}

wait_healthy() { # SECS
    local end; end=$(deadline "$1")
    until healthy; do
        before "$end" || {
            echo "patroni.sh: cluster not healthy after $1 s; members:" >&2
            cluster_json | jq -c '.members[] | {name, role, state, lag}' >&2 2>/dev/null || echo "  no REST API answers" >&2
            echo "logs: $BASE/node*/patroni.log, $BASE/etcd/etcd.log" >&2
            return 1
        }
        sleep 0.2
    done
}

apply_timing() { # NAME: PATCH /config on any node that answers, then wait until it shows
    local t l r body n
    read -r t l r <<< "$(timing_values "$1")"
    body=$(printf '{"ttl": %d, "loop_wait": %d, "retry_timeout": %d}' "$t" "$l" "$r")
    local end; end=$(deadline 60)
    while before "$end"; do
        for n in 1 2 3; do
            if curl -fsS -m 2 -X PATCH -H 'Content-Type: application/json' -d "$body" \
                "http://127.0.0.1:$(api_port "$n")/config" >/dev/null 2>&1; then
                echo "$1" > "$BASE/timing"
                # in force once the leader renewed its lock with a lease of the new TTL
                # (v2: once it renewed the key twice after the PATCH, its TTL is the new one)
                local i0 renewals=0 i
                i0=$(leader_index)
                while before "$end"; do
                    if [ "$DCS" = etcd ]; then
                        i=$(leader_index)
                        if [ -n "$i" ] && [ "$i" != "$i0" ]; then renewals=$((renewals + 1)); i0=$i; fi
                        if [ $renewals -ge 2 ]; then
                            echo "timing=$1 ttl=$t loop_wait=$l retry_timeout=$r"
                            return 0
                        fi
                    elif [ "$(leader_lease_ttl)" = "$t" ]; then
                        echo "timing=$1 ttl=$t loop_wait=$l retry_timeout=$r"
                        return 0
                    fi
                    sleep 0.2
                done
                die "the leader lock's lease did not take ttl=$t within 60 s"
            fi
        done
        sleep 0.2
    done
    die "could not PATCH /config with $body within 60 s"
}

# etcd's view (v3 JSON gateway): the leader key's value (node name) and its lease's TTL
etcd_post() { curl -fsS -m 1 -X POST "http://127.0.0.1:$ETCD_PORT/v3/$1" -d "$2" 2>/dev/null; }
leader_kv() { etcd_post kv/range "{\"key\":\"$(printf /service/bench/leader | base64 -w0)\"}" | jq -c '.kvs[0] // empty'; }
leader_v2() { curl -fsS -m 1 "http://127.0.0.1:$ETCD_PORT/v2/keys/service/bench/leader" 2>/dev/null || true; }
etcd_leader() {
    if [ "$DCS" = etcd ]; then leader_v2 | jq -r '.node.value // empty'; return 0; fi
    leader_kv | jq -r '.value // empty' | base64 -d 2>/dev/null || true
}
leader_lease_ttl() { # v3: the lease's granted TTL; v2: the key's remaining TTL
    if [ "$DCS" = etcd ]; then leader_v2 | jq -r '.node.ttl // empty'; return 0; fi
    local lease; lease=$(leader_kv | jq -r '.lease // empty')
    [ -n "$lease" ] && etcd_post lease/timetolive "{\"ID\":\"$lease\"}" | jq -r '.grantedTTL // empty'
    return 0
}
leader_index() { leader_v2 | jq -r '.node.modifiedIndex // empty' 2>/dev/null || true; }

cmd_start() {
    local timing=default
    while [ $# -gt 0 ]; do
        case $1 in
        --timing) timing=${2:?--timing default|tight}; shift 2 ;;
        --timing=*) timing=${1#--timing=}; shift ;;
        *) die "start: unknown argument $1" ;;
        esac
    done
    local t l r
    read -r t l r <<< "$(timing_values "$timing")"
    for tool in etcd "$PATRONI" haproxy curl jq psql setpriv; do
        command -v "$tool" >/dev/null || die "$tool is missing (install.sh here; apt-get install -y haproxy curl jq postgresql-15 util-linux)"
    done
    "$PATRONI" --version | grep -q ' 4\.1\.' || echo "patroni.sh: warning: $("$PATRONI" --version) is not Patroni 4.1" >&2
    [ -n "$PY" ] || die "python3 is missing (the cut proxy needs it)"
    [ -n "$PG_BIN" ] && [ -x "$PG_BIN/postgres" ] && [ -x "$PG_BIN/pg_rewind" ] \
        || die "no PostgreSQL 15 binaries (postgres, pg_rewind) in '${PG_BIN}': apt-get install -y postgresql-15, or set PT_PG_BIN"
    "$PG_BIN/postgres" --version | grep -q ' 15\.' || echo "patroni.sh: warning: $("$PG_BIN/postgres" --version) is not 15" >&2
    if [ "$(id -u)" = 0 ]; then
        id -u "$PG_USER" >/dev/null 2>&1 || die "running as root, PostgreSQL needs an unprivileged user: '$PG_USER' does not exist (set PT_PG_USER)"
        setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- test -x "$BASE" \
            || die "user $PG_USER cannot reach $BASE (a parent directory is not searchable): choose another PT_BASE"
    fi
    mkdir -p "$RUN"
    save_ports
    local n
    for n in 1 2 3; do
        mkdir -p "$BASE/node$n"
        [ -f "$BASE/node$n/patroni.yml" ] || write_patroni_config "$n" "$t" "$l" "$r"
        [ "$(id -u)" = 0 ] && chown "$PG_USER:" "$BASE/node$n" && chmod 700 "$BASE/node$n"
    done
    write_haproxy_config
    start_etcd
    for n in 1 2 3; do start_proxy "$n"; done
    local end; end=$(deadline "${PT_START_TIMEOUT:-120}")
    if [ ! -f "$BASE/node1/data/PG_VERSION" ]; then
        # a new cluster: node 1 bootstraps (initdb) alone first; the others clone from it
        start_patroni 1
        until [ "$(current_primary)" != "" ]; do
            alive patroni1 || die "Patroni 1 exited: see $BASE/node1/patroni.log"
            before "$end" || die "no primary after ${PT_START_TIMEOUT:-120} s: see $BASE/node*/patroni.log"
            sleep 0.2
        done
    fi
    # resuming (a full restart): all three at once; in synchronous mode only the last
    # leader or its sync standby may take the lock, so none can be left out
    start_patroni 1
    start_patroni 2
    start_patroni 3
    start_haproxy
    apply_timing "$timing" >/dev/null
    wait_healthy "${PT_START_TIMEOUT:-120}" || exit 1
    for n in 1 2 3; do postmaster_pid "$n" > "$RUN/postgres$n.pid"; done
    echo "started: HAProxy 127.0.0.1:$HAPROXY_PORT (writes), PostgreSQL $PG_PORT1 $PG_PORT2 $PG_PORT3, Patroni REST $API_PORT1 $API_PORT2 $API_PORT3, etcd $ETCD_PORT; timing=$timing (ttl=$t loop_wait=$l retry_timeout=$r); sync_mode=$SYNC_MODE; primary=$(current_primary); base=$BASE"
}

cmd_stop() {
    [ -d "$RUN" ] || { echo "nothing started in $BASE"; return 0; }
    local n pid name
    if [ "${1:-}" = --kill ]; then # no graceful shutdown: every node's host dies at once
        for n in 1 2 3; do
            { alive "patroni$n" || [ -n "$(postmaster_pid "$n")" ]; } && cmd_kill "$n"
        done
    fi
    # wake everything paused first: a stopped process cannot act on SIGTERM
    for n in 1 2 3; do
        for pid in $(pidof_rec "patroni$n") $(postmaster_pid "$n") $(cat "$RUN/paused$n.children" 2>/dev/null || true); do
            kill -CONT "$pid" 2>/dev/null || true
        done
        [ -f "$RUN/proxy$n.pid" ] && kill -USR2 "$(pidof_rec "proxy$n")" 2>/dev/null || true
    done
    for n in 1 2 3; do
        alive "patroni$n" && kill -TERM "$(pidof_rec "patroni$n")" && echo "stopping patroni$n (pid $(pidof_rec "patroni$n"))"
    done
    local end; end=$(deadline 30)
    for n in 1 2 3; do
        while alive "patroni$n" && before "$end"; do sleep 0.1; done
        if alive "patroni$n"; then kill -9 "$(pidof_rec "patroni$n")" 2>/dev/null || true; echo "killed patroni$n (no exit in 30 s)"; fi
        rm -f "$RUN/patroni$n.pid"
        pid=$(postmaster_pid "$n")
        if [ -n "$pid" ]; then
            # left behind by a killed Patroni: stop it (fast), then kill it
            kill -INT "$pid" 2>/dev/null || true
            local e2; e2=$(deadline 10)
            while kill -0 "$pid" 2>/dev/null && before "$e2"; do sleep 0.1; done
            # shellcheck disable=SC2046 # the children's PIDs, one word each
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" $(children_of "$pid") 2>/dev/null
            echo "stopped postgres$n (pid $pid)"
        fi
        rm -f "$RUN/postgres$n.pid" "$RUN/paused$n.children"
    done
    for name in haproxy proxy1 proxy2 proxy3 etcd; do
        if alive "$name"; then
            pid=$(pidof_rec "$name")
            kill -TERM "$pid" 2>/dev/null || true
            end=$(deadline 10)
            while kill -0 "$pid" 2>/dev/null && before "$end"; do sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            echo "stopped $name (pid $pid)"
        fi
        rm -f "$RUN/$name.pid"
    done
}

cmd_status() {
    local n j role state prim
    for n in 1 2 3; do
        j=$(node_json "$n"); [ -n "$j" ] || j='{}'
        role=$(echo "$j" | jq -r '.role // "down"' 2>/dev/null || echo down)
        state=$(echo "$j" | jq -r '.state // "down"' 2>/dev/null || echo down)
        echo "node=$n role=$role state=$state patroni_pid=$(alive "patroni$n" && pidof_rec "patroni$n" || echo -) postgres_pid=$(postmaster_pid "$n" | grep . || echo -) pg_port=$(pg_port "$n") api_port=$(api_port "$n") etcd_link=$(cat "$RUN/proxy$n.state" 2>/dev/null || echo down)"
    done
    prim=$(current_primary)
    echo "primary=${prim:-none} etcd_leader=$(etcd_leader | grep . || echo none) lease_ttl=$(leader_lease_ttl | grep . || echo -) haproxy_port=$HAPROXY_PORT timing=$(cat "$BASE/timing" 2>/dev/null || echo unknown) dcs=$DCS sync_mode=$SYNC_MODE"
}

cmd_pids() { # N
    node_ok "${1:-}"
    local pm
    pm=$(postmaster_pid "$1")
    echo "patroni=$(alive "patroni$1" && pidof_rec "patroni$1" || echo -) postgres=${pm:--} children=\"$( [ -n "$pm" ] && children_of "$pm")\""
}

cmd_kill() { # N: the host dies: freeze patroni and postgres, then SIGKILL them all
    node_ok "${1:-}"
    local p pm kids
    p=$(alive "patroni$1" && pidof_rec "patroni$1" || true)
    pm=$(postmaster_pid "$1")
    [ -n "$p$pm" ] || die "node $1 runs neither Patroni nor PostgreSQL"
    # shellcheck disable=SC2086
    kill -STOP $p $pm 2>/dev/null || true
    kids=$( [ -n "$pm" ] && children_of "$pm" || true)
    # shellcheck disable=SC2086
    kill -9 $p $pm $kids 2>/dev/null || true
    rm -f "$RUN/patroni$1.pid" "$RUN/postgres$1.pid"
    echo "killed node $1: patroni=${p:--} postgres=${pm:--} children=\"$kids\" at $(now)"
}

cmd_pause() { # N what
    node_ok "${1:-}"
    local what=${2:-all} p pm kids
    case $what in patroni | postgres | all) ;; *) die "pause N patroni|postgres|all" ;; esac
    if [ "$what" != postgres ]; then
        p=$(pidof_rec "patroni$1"); [ -n "$p" ] || die "no Patroni recorded for node $1"
        kill -STOP "$p"; echo "paused patroni$1 (pid $p)"
    fi
    if [ "$what" != patroni ]; then
        pm=$(postmaster_pid "$1"); [ -n "$pm" ] || die "node $1's PostgreSQL does not run"
        kill -STOP "$pm"
        kids=$(children_of "$pm")
        # shellcheck disable=SC2086
        [ -n "$kids" ] && kill -STOP $kids
        echo "$pm $kids" > "$RUN/paused$1.children"
        echo "paused postgres$1 (postmaster $pm, children $kids)"
    fi
}

cmd_resume() { # N what
    node_ok "${1:-}"
    local what=${2:-all} p
    case $what in patroni | postgres | all) ;; *) die "resume N patroni|postgres|all" ;; esac
    if [ "$what" != patroni ] && [ -f "$RUN/paused$1.children" ]; then
        # shellcheck disable=SC2046
        kill -CONT $(cat "$RUN/paused$1.children") 2>/dev/null || true
        echo "resumed postgres$1 ($(cat "$RUN/paused$1.children"))"
        rm -f "$RUN/paused$1.children"
    fi
    if [ "$what" != postgres ]; then
        p=$(pidof_rec "patroni$1"); [ -n "$p" ] && kill -CONT "$p" && echo "resumed patroni$1 (pid $p)"
    fi
    return 0
}

cmd_cut() { # N cut|heal
    node_ok "${1:-}"
    alive "proxy$1" || die "node $1's cut proxy does not run"
    local want=$2 sig=USR1 end
    [ "$want" = open ] && sig=USR2
    kill -"$sig" "$(pidof_rec "proxy$1")"
    end=$(deadline 5)
    until [ "$(cat "$RUN/proxy$1.state" 2>/dev/null)" = "$want" ]; do
        before "$end" || die "proxy $1 did not switch to $want"
        sleep 0.02
    done
    echo "node $1 etcd link: $want at $(now)"
}

cmd_restart() { # N
    node_ok "${1:-}"
    alive "patroni$1" && die "Patroni $1 still runs (pid $(pidof_rec "patroni$1"))"
    # a postmaster that still runs (only Patroni was killed) is adopted by the new Patroni
    start_proxy "$1"
    start_patroni "$1"
    echo "started patroni$1 (pid $(pidof_rec "patroni$1")); wait-healthy waits for its rejoin"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
load_ports
case $cmd in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
status) cmd_status ;;
primary)
    if [ "${1:-}" = --wait ]; then
        end=$(deadline "${2:?--wait SECS}")
        while p=$(current_primary); [ -z "$p" ] || [ "$p" = two ]; do
            before "$end" || die "no single primary within $2 s"
            sleep 0.1
        done
        echo "$p"
    else
        p=$(current_primary); [ -n "$p" ] || die "no primary"; echo "$p"
    fi
    ;;
pids) cmd_pids "$@" ;;
wait-healthy) wait_healthy "${1:-${PT_START_TIMEOUT:-120}}" && echo "healthy: primary=$(current_primary)" ;;
kill) cmd_kill "$@" ;;
pause) cmd_pause "$@" ;;
resume) cmd_resume "$@" ;;
cut) cmd_cut "${1:-}" cut ;;
heal) cmd_cut "${1:-}" open ;;
restart) cmd_restart "$@" ;;
timing) apply_timing "${1:?timing default|tight}" ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
