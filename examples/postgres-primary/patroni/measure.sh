#!/usr/bin/env bash
# Measure failovers by hand against a running cluster (patroni.sh start first):
#
#   measure.sh default|tight kill|cut|pause-patroni|pause-postgres|restart-all [RUNS]
#
# Each run: wait until healthy, start writer.py (one INSERT every 10 ms through HAProxy,
# synchronous_commit = on) for >= 3 s, apply the fault to the primary, wait until writes
# commit again (at most 180 s) plus 2 s, stop the writer, undo the fault (kill: restart
# the node; cut: heal; pause: resume; restart-all kills all three hosts with kill -9 and
# restarts them at once, so the writes resume only after the restart), wait until the old primary rejoined (healthy), then
# count the acknowledged ids the table lacks. One result line per run on stdout and in
# $PT_BASE/measure/results:
#   timing=.. fault=.. run=.. old=N new=M gap_s=.. fault_to_ok_s=.. acked=.. dual_primary_s=..
#   dual_writable_s=.. lost=.. healed=yes|no load=..  (healed=no ends the series: HEAL_TIMEOUT, 120 s)
# gap_s: first failed write to the first acknowledged write after it (the longest outage;
# null: the writes never failed);
# fault_to_ok_s: from the fault to the first acknowledged write after it.
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
P=$here/patroni.sh
timing=${1:?default|tight}
fault=${2:?kill|cut|pause-patroni|pause-postgres|restart-all}
runs=${3:-3}
BASE=${PT_BASE:-$here/run}
[ -f "$BASE/ports.env" ] || { echo "measure.sh: no cluster in $BASE: patroni.sh start first" >&2; exit 1; }
# shellcheck disable=SC1091
. "$BASE/ports.env"
out=$BASE/measure
mkdir -p "$out"
pg_ports="$PG_PORT1,$PG_PORT2,$PG_PORT3"

"$P" wait-healthy 180 >/dev/null
"$P" timing "$timing" >/dev/null

for i in $(seq 1 "$runs"); do
    "$P" wait-healthy 240 >/dev/null
    old=$("$P" primary --wait 30)
    stamp=$(date +%s)
    dir=$out/$timing-$fault-$i-$stamp
    table=m_${timing}_${fault//-/_}_${i}_$stamp
    /usr/bin/python3 "$here/writer.py" run --port "$HAPROXY_PORT" --pg-ports "$pg_ports" --dir "$dir" --table "$table" \
        > "$dir.summary" 2> "$dir.err" &
    wpid=$!
    end=$(( $(date +%s) + 30 ))
    until [ -f "$dir/committed" ] && [ "$(wc -l < "$dir/committed")" -ge 300 ]; do
        kill -0 "$wpid" 2>/dev/null || { echo "writer died: $(cat "$dir.err")" >&2; exit 1; }
        [ "$(date +%s)" -lt "$end" ] || { echo "measure.sh: writer committed < 300 in 30 s" >&2; kill "$wpid"; exit 1; }
        sleep 0.1
    done
    t_fault=$(date +%s.%N)
    case $fault in
    kill) "$P" kill "$old" >/dev/null ;;
    cut) "$P" cut "$old" >/dev/null ;;
    pause-patroni) "$P" pause "$old" patroni >/dev/null ;;
    pause-postgres) "$P" pause "$old" postgres >/dev/null ;;
    restart-all)
        for n in 1 2 3; do "$P" kill "$n" >/dev/null; done
        for n in 1 2 3; do "$P" restart "$n" >/dev/null; done
        ;;
    *) echo "unknown fault $fault" >&2; kill "$wpid"; exit 2 ;;
    esac
    # an outage starts (a failed write after the fault), at most ttl + 2*retry_timeout + 15 s;
    # none: the writes never stopped (gap_s=null)
    read -r ttl _ retry <<< "$(case $timing in default) echo "30 10 10" ;; *) echo "20 1 3" ;; esac)"
    end=$(( $(date +%s) + ttl + 2 * retry + 15 ))
    later() { [ -f "$1" ] && awk -v a="$(cat "$1")" -v b="$2" 'BEGIN { exit !(a > b) }'; }
    outage=1
    until later "$dir/last_fail" "$t_fault"; do
        [ "$(date +%s)" -lt "$end" ] || { outage=0; break; }
        sleep 0.1
    done
    # ... and ends: the last write after the fault succeeded (at most 180 s)
    end=$(( $(date +%s) + 180 ))
    while [ $outage = 1 ] && ! later "$dir/last_ok" "$(cat "$dir/last_fail")"; do
        [ "$(date +%s)" -lt "$end" ] || { echo "measure.sh: no write committed within 180 s of the outage" >&2; break; }
        sleep 0.1
    done
    new=$("$P" primary 2>/dev/null || echo none)
    sleep 2 # a little steady state after the failover, so a late outage shows
    kill -TERM "$wpid"
    end=$(( $(date +%s) + 20 )) # a blocked INSERT ends within statement_timeout (10 s)
    while kill -0 "$wpid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
    kill -0 "$wpid" 2>/dev/null && { echo "measure.sh: writer $wpid ignored SIGTERM: killed" >&2; kill -9 "$wpid"; }
    wait "$wpid" || true
    case $fault in
    kill) "$P" restart "$old" >/dev/null ;;
    cut) "$P" heal "$old" >/dev/null ;;
    pause-patroni) "$P" resume "$old" patroni >/dev/null ;;
    pause-postgres) "$P" resume "$old" postgres >/dev/null ;;
    esac
    healed=yes
    "$P" wait-healthy "${HEAL_TIMEOUT:-120}" >/dev/null || { healed=no; echo "measure.sh: run $i: cluster did not heal within ${HEAL_TIMEOUT:-120} s" >&2; }
    lost=$(/usr/bin/python3 "$here/writer.py" check --port "$HAPROXY_PORT" --dir "$dir" --table "$table" | jq -r .lost)
    line=$(jq -r --arg tf "$t_fault" '
        ([.outages[] | select(.first_ok_after > ($tf | tonumber))] | max_by(.gap_s) // {gap_s: null, first_ok_after: null}) as $o
        | "gap_s=\($o.gap_s) fault_to_ok_s=\(if $o.first_ok_after then (($o.first_ok_after - ($tf | tonumber)) * 1000 | round / 1000) else null end) acked=\(.acknowledged) dual_primary_s=\(.dual_primary_s) dual_writable_s=\(.dual_writable_s)"' \
        "$dir.summary")
    echo "timing=$timing fault=$fault run=$i old=$old new=$new $line lost=$lost healed=$healed load=\"$(cut -d' ' -f1-3 /proc/loadavg)\"" | tee -a "$out/results"
    [ $healed = yes ] || { echo "measure.sh: stopping: the cluster did not heal (patroni.sh status)" >&2; exit 1; }
done
