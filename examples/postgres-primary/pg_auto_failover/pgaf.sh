#!/usr/bin/env bash
# pg_auto_failover 2.0 (a monitor and three data nodes, each node's own PostgreSQL 15)
# + HAProxy on loopback: the third side of the side-by-side comparison with bully and
# Patroni (issue 39). Configs and scripts only; install.sh here installs Debian's
# postgresql-15-auto-failover. The same commands as ../patroni/patroni.sh, so that the
# bench (benches/pg_failover/pgaf.rs) drives both alike.
#
#   pgaf.sh start                 start (or resume) the formation, wait until healthy
#                                 (bounded by PGAF_START_TIMEOUT)
#   pgaf.sh stop [--kill]         stop exactly what this base dir started (by PID;
#                                 --kill: kill -9 the data nodes, no shutdown)
#   pgaf.sh status                one line per node, then primary=N
#   pgaf.sh primary [--wait SECS] the node the monitor has as primary (reported and
#                                 assigned)
#   pgaf.sh wait-healthy [SECS]   one primary, two secondaries (reported = assigned),
#                                 a write through HAProxy commits
#   pgaf.sh kill N                kill -9 node N's host: its pg_autoctl (the supervisor
#                                 and its services), postmaster and every postgres child
#                                 (frozen first, so nothing restarts anything)
#   pgaf.sh pause N | resume N    SIGSTOP / SIGCONT every one of those processes
#   pgaf.sh cut N | heal N        node N is cut off from the other hosts and the monitor
#                                 (both its proxies forward nothing) / joined again
#   pgaf.sh restart N             start node N's pg_autoctl again (after kill)
#
# Addresses. PostgreSQL N listens on 127.0.0.1:PGn, the monitor on 127.0.0.1:MON.
# Node N is registered to the monitor as 127.0.1.N:PGn, a cut proxy
# (../patroni/cutproxy.py) in front of its server: the monitor's health checks and
# the other nodes' replication reach it only through that proxy. Node N's pg_autoctl
# reaches the monitor through 127.0.2.N:MON, a second proxy of its own. `cut N` cuts
# both: the host is cut off from everyone but its clients (HAProxy and the bench's
# pollers use 127.0.0.1:PGn), like the bully side's cut (tests/common/postgres_bully.rs).
#
# Environment (read by start; later commands read $PGAF_BASE/ports.env written by start):
#   PGAF_BASE           base dir (default ./run here); everything lives there
#   PGAF_PORT_BASE      default 15500; the ports below default to it plus an offset
#   PGAF_HAPROXY_PORT   +0   clients write here (routed to the writable server)
#   PGAF_MONITOR_PORT   +1   the monitor's PostgreSQL
#   PGAF_PG_PORT{1,2,3} +11..+13  PostgreSQL of node N
#   PGAF_PG_USER        the user pg_autoctl and PostgreSQL run as when this script runs
#                       as root (default postgres)
#   PGAF_PG_BIN         PostgreSQL 15 binaries (default /usr/lib/postgresql/15/bin)
#   PGAF_START_TIMEOUT  seconds start and wait-healthy wait (default 180)
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
CUTPROXY=$here/../patroni/cutproxy.py

die() { echo "pgaf.sh: $*" >&2; exit 1; }
now() { date +%s.%N; }
deadline() { echo $(( $(date +%s) + ${1%.*} )); }
before() { [ "$(date +%s)" -lt "$1" ]; }

BASE=${PGAF_BASE:-$here/run}
mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd)
RUN=$BASE/pids

load_ports() {
    if [ -f "$BASE/ports.env" ]; then
        # shellcheck disable=SC1091
        . "$BASE/ports.env"
        return
    fi
    local b=${PGAF_PORT_BASE:-15500}
    HAPROXY_PORT=${PGAF_HAPROXY_PORT:-$b}
    MONITOR_PORT=${PGAF_MONITOR_PORT:-$((b + 1))}
    PG_PORT1=${PGAF_PG_PORT1:-$((b + 11))}; PG_PORT2=${PGAF_PG_PORT2:-$((b + 12))}; PG_PORT3=${PGAF_PG_PORT3:-$((b + 13))}
    if [ "$(id -u)" = 0 ]; then PG_USER=${PGAF_PG_USER:-postgres}; else PG_USER=$(id -un); fi
    PG_BIN=${PGAF_PG_BIN:-/usr/lib/postgresql/15/bin}
}
save_ports() {
    {
        for v in HAPROXY_PORT MONITOR_PORT PG_PORT1 PG_PORT2 PG_PORT3 PG_USER PG_BIN; do
            printf '%s=%q\n' "$v" "${!v}"
        done
    } > "$BASE/ports.env"
}
pg_port() { local v=PG_PORT$1; echo "${!v}"; }
node_ok() { case ${1:-} in 1 | 2 | 3) ;; *) die "node must be 1, 2 or 3 (got '${1:-}')" ;; esac; }
# node N's own address, as the monitor and the other nodes reach it (its cut proxy)
node_host() { echo "127.0.1.$1"; }
# where node N's pg_autoctl reaches the monitor (its second cut proxy)
monitor_host() { echo "127.0.2.$1"; }

# alive NAME: the process recorded in pids/NAME.pid runs (a zombie does not count: here
# killed processes may be reparented to an init that does not reap them)
running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
alive() { [ -s "$RUN/$1.pid" ] && running "$(cat "$RUN/$1.pid")"; }
pidof_rec() { cat "$RUN/$1.pid" 2>/dev/null || true; }

# postmaster_pid DIR: the postmaster of that data dir if it runs
postmaster_pid() {
    local f=$1/postmaster.pid pid
    [ -r "$f" ] || return 0
    pid=$(head -n 1 "$f" 2>/dev/null || true)
    [ -n "$pid" ] && running "$pid" || return 0
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$1" && echo "$pid"
    return 0
}
descendants() { # PID...: every process below them, depth first
    local p c
    for p in "$@"; do
        for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do
            echo "$c"
            descendants "$c"
        done
    done
}
# host_pids N: node N's pg_autoctl supervisor, its services, the postmaster and its
# children (the postmaster too when its supervisor is gone)
host_pids() {
    local sup pm
    sup=$(alive "node$1" && pidof_rec "node$1" || true)
    pm=$(postmaster_pid "$BASE/node$1/data")
    { [ -n "$sup" ] && echo "$sup" && descendants "$sup"
      [ -n "$pm" ] && echo "$pm" && descendants "$pm"
      true; } | sort -un | tr '\n' ' ' | sed 's/ $//'
}

as_pg() { # HOME CMD...: run as the PostgreSQL user with HOME (pg_autoctl keeps its
          # config and state under HOME's XDG dirs), exec: the PID stays the same
    local home=$1; shift
    if [ "$(id -u)" = 0 ]; then
        exec setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- \
            env -i PATH="$PG_BIN:/usr/bin:/bin" HOME="$home" LANG=C.UTF-8 "$@"
    else
        exec env -i PATH="$PG_BIN:/usr/bin:/bin" HOME="$home" LANG=C.UTF-8 "$@"
    fi
}

monitor_sql() { # SQL -> rows (|-separated), nothing when the monitor does not answer
    PGCONNECT_TIMEOUT=2 psql -X -q -At -h 127.0.0.1 -p "$MONITOR_PORT" -U autoctl_node -d pg_auto_failover \
        -c "SET statement_timeout = '2s'" -c "$1" 2>/dev/null || true
}
# states: "N|reported|assigned" per node
states() {
    monitor_sql "SELECT regexp_replace(nodename, '^node', ''), reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid"
}
current_primary() { states | awk -F'|' '$2 == "primary" && $3 == "primary" {print $1}' | head -n 1; }

healthy() {
    local s
    s=$(states)
    [ "$(echo "$s" | awk -F'|' '$2 == "primary" && $3 == "primary"' | wc -l)" = 1 ] || return 1
    [ "$(echo "$s" | awk -F'|' '$2 == "secondary" && $3 == "secondary"' | wc -l)" = 2 ] || return 1
    PGCONNECT_TIMEOUT=2 psql -X -q -h 127.0.0.1 -p "$HAPROXY_PORT" -U postgres -d postgres -tA \
        -c "SET statement_timeout = '3s'; CREATE TABLE IF NOT EXISTS pgaf_sh_probe(at timestamptz); INSERT INTO pgaf_sh_probe VALUES (now())" \
        >/dev/null 2>&1
}

wait_healthy() { # SECS
    local end; end=$(deadline "$1")
    until healthy; do
        before "$end" || {
            echo "pgaf.sh: formation not healthy after $1 s; node|reported|assigned:" >&2
            states | sed 's/^/  /' >&2
            echo "logs: $BASE/node*/run.log, $BASE/monitor/run.log" >&2
            return 1
        }
        sleep 0.2
    done
}

write_haproxy_config() {
    # The check asks each server what libpq's target_session_attrs=read-write asks: a
    # PostgreSQL 14+ server reports in_hot_standby and default_transaction_read_only in
    # its startup answer, so the check sends a startup packet (user postgres, database
    # postgres, application_name haproxy_check; trust) and expects both "off", then
    # says Terminate. A standby answers "on" and fails at the 200 ms check timeout.
    local startup off_standby off_ro
    startup=$("$PY" -c '
body = b"\0\3\0\0" + b"user\0postgres\0database\0postgres\0application_name\0haproxy_check\0\0"
print(((len(body) + 4).to_bytes(4, "big") + body).hex())')
    off_standby=$(printf 'in_hot_standby\0off\0' | od -An -tx1 | tr -d ' \n')
    off_ro=$(printf 'default_transaction_read_only\0off\0' | od -An -tx1 | tr -d ' \n')
    cat > "$BASE/haproxy.cfg" <<EOF
# written by pgaf.sh start: clients connect to 127.0.0.1:$HAPROXY_PORT and reach the
# PostgreSQL that takes writes (pg_auto_failover has no REST API). Tuned like
# ../patroni/patroni.sh's (inter 100 ms, fall 1, rise 1, shutdown-sessions).
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
    option tcp-check
    tcp-check connect
    tcp-check send-binary $startup
    tcp-check expect binary $off_standby
    tcp-check expect binary $off_ro
    tcp-check send-binary 5800000004
    default-server inter 100 fastinter 100 downinter 100 fall 1 rise 1 on-marked-down shutdown-sessions
    server node1 127.0.0.1:$PG_PORT1 check
    server node2 127.0.0.1:$PG_PORT2 check
    server node3 127.0.0.1:$PG_PORT3 check
EOF
}

start_proxy() { # NAME LISTEN UPSTREAM
    alive "$1" && return 0
    "$PY" "$CUTPROXY" "$2" "$3" "$RUN/$1.state" >> "$BASE/$1.log" 2>&1 &
    echo $! > "$RUN/$1.pid"
    local end; end=$(deadline 10)
    until [ -s "$RUN/$1.state" ]; do
        alive "$1" || die "proxy $1 exited: see $BASE/$1.log"
        before "$end" || die "proxy $1 did not start within 10 s"
        sleep 0.05
    done
}
start_proxies() { # N
    start_proxy "pgproxy$1" "$(node_host "$1"):$(pg_port "$1")" "127.0.0.1:$(pg_port "$1")"
    start_proxy "monproxy$1" "$(monitor_host "$1"):$MONITOR_PORT" "127.0.0.1:$MONITOR_PORT"
}

start_keeper() { # NAME HOME: pg_autoctl run for the data dir HOME/data
    alive "$1" && return 0
    (as_pg "$2" pg_autoctl run --pgdata "$2/data" >> "$2/run.log" 2>&1) &
    echo $! > "$RUN/$1.pid"
}

create_monitor() {
    local dir=$BASE/monitor
    [ -f "$dir/data/PG_VERSION" ] && return 0
    (as_pg "$dir" pg_autoctl create monitor --pgdata "$dir/data" --pgport "$MONITOR_PORT" \
        --hostname 127.0.0.1 --listen 127.0.0.1 --auth trust --no-ssl --pgctl "$PG_BIN/pg_ctl") \
        >> "$dir/create.log" 2>&1 || die "pg_autoctl create monitor failed: see $dir/create.log"
}

create_node() { # N: registers node N (node 1 initdb's and is primary, the others clone)
    local n=$1 dir=$BASE/node$1
    [ -f "$dir/data/PG_VERSION" ] && return 0
    (as_pg "$dir" pg_autoctl create postgres --pgdata "$dir/data" --pgport "$(pg_port "$n")" \
        --listen 127.0.0.1 --hostname "$(node_host "$n")" --name "node$n" \
        --monitor "postgres://autoctl_node@$(monitor_host "$n"):$MONITOR_PORT/pg_auto_failover?sslmode=disable" \
        --skip-pg-hba --no-ssl --pgctl "$PG_BIN/pg_ctl") \
        >> "$dir/create.log" 2>&1 || die "pg_autoctl create postgres (node $n) failed: see $dir/create.log"
}

wait_state() { # N STATE SECS: the monitor has node N reported in STATE
    local end; end=$(deadline "$3")
    until states | grep -q "^$1|$2|"; do
        before "$end" || die "node $1 not $2 within $3 s: see $BASE/node$1/run.log"
        sleep 0.2
    done
}

cmd_start() {
    for tool in pg_autoctl haproxy psql setpriv od; do
        command -v "$tool" >/dev/null || die "$tool is missing (install.sh here; apt-get install -y haproxy postgresql-15 util-linux)"
    done
    [ -n "$PY" ] || die "python3 is missing (the cut proxy needs it)"
    [ -x "$PG_BIN/pg_ctl" ] || die "no PostgreSQL 15 in '$PG_BIN' (apt-get install -y postgresql-15, or set PGAF_PG_BIN)"
    if [ "$(id -u)" = 0 ]; then
        id -u "$PG_USER" >/dev/null 2>&1 || die "running as root, PostgreSQL needs an unprivileged user: '$PG_USER' does not exist"
        setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- test -x "$BASE" \
            || die "user $PG_USER cannot reach $BASE (a parent directory is not searchable)"
    fi
    mkdir -p "$RUN"
    save_ports
    local n limit=${PGAF_START_TIMEOUT:-180}
    for n in monitor node1 node2 node3; do
        mkdir -p "$BASE/$n"
        [ "$(id -u)" = 0 ] && chown "$PG_USER:" "$BASE/$n" && chmod 700 "$BASE/$n"
    done
    write_haproxy_config
    create_monitor
    start_keeper monitor "$BASE/monitor"
    local end; end=$(deadline 60)
    until [ -n "$(monitor_sql 'SELECT 1')" ]; do
        alive monitor || die "the monitor's pg_autoctl exited: see $BASE/monitor/run.log"
        before "$end" || die "the monitor does not answer after 60 s: see $BASE/monitor/run.log"
        sleep 0.2
    done
    for n in 1 2 3; do start_proxies "$n"; done
    for n in 1 2 3; do
        # a new formation: node 1 first (single), then each standby clones from it
        if [ ! -f "$BASE/node$n/data/PG_VERSION" ]; then
            create_node "$n"
            start_keeper "node$n" "$BASE/node$n"
            if [ "$n" = 1 ]; then wait_state 1 single "$limit"; else wait_state "$n" secondary "$limit"; fi
        fi
    done
    for n in 1 2 3; do start_keeper "node$n" "$BASE/node$n"; done
    if ! alive haproxy; then
        haproxy -f "$BASE/haproxy.cfg" -db >> "$BASE/haproxy.log" 2>&1 &
        echo $! > "$RUN/haproxy.pid"
    fi
    wait_healthy "$limit" || exit 1
    echo "started: HAProxy 127.0.0.1:$HAPROXY_PORT (writes), PostgreSQL $PG_PORT1 $PG_PORT2 $PG_PORT3, monitor $MONITOR_PORT; primary=$(current_primary); base=$BASE"
}

stop_pid() { # NAME PID SECS: SIGTERM, then SIGKILL after SECS
    local end
    kill -TERM "$2" 2>/dev/null || true
    end=$(deadline "$3")
    while running "$2" && before "$end"; do sleep 0.1; done
    running "$2" && kill -9 "$2" 2>/dev/null && echo "killed $1 (no exit in $3 s)"
    echo "stopped $1 (pid $2)"
}

cmd_stop() {
    [ -d "$RUN" ] || { echo "nothing started in $BASE"; return 0; }
    local n pid name pids
    for n in 1 2 3; do
        # wake what is paused: a stopped process cannot act on SIGTERM
        pids=$(host_pids "$n")
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -CONT $pids 2>/dev/null
        for name in "pgproxy$n" "monproxy$n"; do alive "$name" && kill -USR2 "$(pidof_rec "$name")"; done
        if [ "${1:-}" = --kill ] && [ -n "$pids" ]; then cmd_kill "$n"; fi
    done
    for name in node1 node2 node3 monitor; do
        if alive "$name"; then stop_pid "$name" "$(pidof_rec "$name")" 30; fi
        rm -f "$RUN/$name.pid"
    done
    for name in node1 node2 node3 monitor; do # a postmaster left behind by a killed keeper
        pid=$(postmaster_pid "$BASE/$name/data")
        if [ -n "$pid" ]; then
            kill -INT "$pid" 2>/dev/null || true
            local e2; e2=$(deadline 10)
            while running "$pid" && before "$e2"; do sleep 0.1; done
            # shellcheck disable=SC2046
            running "$pid" && kill -9 "$pid" $(descendants "$pid") 2>/dev/null
            echo "stopped postgres of $name (pid $pid)"
        fi
    done
    for name in haproxy pgproxy1 pgproxy2 pgproxy3 monproxy1 monproxy2 monproxy3; do
        if alive "$name"; then stop_pid "$name" "$(pidof_rec "$name")" 10; fi
        rm -f "$RUN/$name.pid"
    done
    rm -f "$RUN"/paused*
}

cmd_status() {
    local n s
    s=$(states)
    for n in 1 2 3; do
        echo "node=$n state=$(echo "$s" | awk -F'|' -v n="$n" '$1 == n {print $2 "/" $3}' | grep . || echo unknown) pids=\"$(host_pids "$n")\" pg_port=$(pg_port "$n") link=$(cat "$RUN/pgproxy$n.state" 2>/dev/null || echo down)"
    done
    echo "primary=$(current_primary | grep . || echo none) haproxy_port=$HAPROXY_PORT monitor_port=$MONITOR_PORT"
}

cmd_kill() { # N: the host dies
    node_ok "${1:-}"
    local pids
    pids=$(host_pids "$1")
    [ -n "$pids" ] || die "node $1 runs neither pg_autoctl nor PostgreSQL"
    # shellcheck disable=SC2086
    kill -STOP $pids 2>/dev/null || true
    # children forked before the freeze
    pids=$(host_pids "$1")
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    rm -f "$RUN/node$1.pid" "$RUN/paused$1"
    echo "killed node $1: pids=\"$pids\" at $(now)"
}

cmd_pause() { # N
    node_ok "${1:-}"
    local pids
    pids=$(host_pids "$1")
    [ -n "$pids" ] || die "node $1 runs neither pg_autoctl nor PostgreSQL"
    # shellcheck disable=SC2086
    kill -STOP $pids
    echo "$pids" > "$RUN/paused$1"
    echo "paused node $1: pids=\"$pids\" at $(now)"
}

cmd_resume() { # N
    node_ok "${1:-}"
    [ -f "$RUN/paused$1" ] || { echo "node $1 is not paused"; return 0; }
    # shellcheck disable=SC2046
    kill -CONT $(cat "$RUN/paused$1") 2>/dev/null || true
    echo "resumed node $1: pids=\"$(cat "$RUN/paused$1")\" at $(now)"
    rm -f "$RUN/paused$1"
}

cmd_cut() { # N cut|open
    node_ok "${1:-}"
    local want=$2 sig=USR1 name end
    [ "$want" = open ] && sig=USR2
    for name in "pgproxy$1" "monproxy$1"; do
        alive "$name" || die "node $1's proxy $name does not run"
        kill -"$sig" "$(pidof_rec "$name")"
    done
    end=$(deadline 5)
    for name in "pgproxy$1" "monproxy$1"; do
        until [ "$(cat "$RUN/$name.state" 2>/dev/null)" = "$want" ]; do
            before "$end" || die "proxy $name did not switch to $want"
            sleep 0.02
        done
    done
    echo "node $1 links: $want at $(now)"
}

cmd_restart() { # N
    node_ok "${1:-}"
    alive "node$1" && die "node $1's pg_autoctl still runs (pid $(pidof_rec "node$1"))"
    start_proxies "$1"
    start_keeper "node$1" "$BASE/node$1"
    echo "started node$1 (pid $(pidof_rec "node$1")); wait-healthy waits for its rejoin"
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
        until p=$(current_primary); [ -n "$p" ]; do
            before "$end" || die "no primary within $2 s"
            sleep 0.1
        done
        echo "$p"
    else
        p=$(current_primary); [ -n "$p" ] || die "no primary"; echo "$p"
    fi
    ;;
wait-healthy) wait_healthy "${1:-${PGAF_START_TIMEOUT:-180}}" && echo "healthy: primary=$(current_primary)" ;;
kill) cmd_kill "$@" ;;
pause) cmd_pause "$@" ;;
resume) cmd_resume "$@" ;;
cut) cmd_cut "${1:-}" cut ;;
heal) cmd_cut "${1:-}" open ;;
restart) cmd_restart "$@" ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
