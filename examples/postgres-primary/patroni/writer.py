#!/usr/bin/python3
"""A simple writer for measuring a failover by hand (the Rust bench has its own writers
in tests/common/postgres*.rs). Needs psycopg2 (Debian: python3-psycopg2).

  writer.py run --port HAPROXY_PORT --pg-ports P1,P2,P3 --dir OUT [--table T]
                [--interval 0.01] [--duration SECS]
      One INSERT (autocommit, synchronous_commit = on) every --interval through HAProxy;
      OUT/committed has every id whose commit was acknowledged, OUT/attempts one line per
      attempt ("t id ok|fail"), OUT/last_ok the time of the last acknowledged commit.
      OUT/last_fail the time of the last failed attempt. A monitor asks every PostgreSQL
      directly every 20 ms whether it is a primary (pg_is_in_recovery() false) and
      whether it can acknowledge a synchronous commit (no synchronous_standby_names, or
      a standby streaming in sync); OUT/dual has the instants two were primaries
      (dual_primary_s) and how many of those two were writable (dual_writable_s).
      Runs until SIGTERM/SIGINT or --duration, then prints a JSON summary: outages
      (first failed to first acknowledged write after it), counts.
  writer.py check --port HAPROXY_PORT --dir OUT [--table T]
      Which acknowledged ids the table (read through HAProxy) lacks: prints JSON
      {"committed": N, "present": M, "lost": K, "lost_ids": [...first 20]}.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

try:
    import psycopg2
except ImportError:
    sys.exit("writer.py needs psycopg2: apt-get install -y python3-psycopg2 (run with /usr/bin/python3)")

stop = threading.Event()  # set by the main thread only (Event.set in a signal handler can deadlock)
stopping = [False]        # what the signal handler sets


def connect(port, timeout=1):
    conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                            connect_timeout=timeout, application_name="writer.py",
                            options="-c synchronous_commit=on -c statement_timeout=10000")
    conn.autocommit = True
    return conn


def monitor(ports, dual_path, samples):
    """One thread per PostgreSQL: its latest (is_primary, is_writable, answered_at)."""
    state = {p: (False, False, 0.0) for p in ports}

    def watch(port):
        conn = None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = connect(port, timeout=1)
                cur = conn.cursor()
                # writable: a primary that can acknowledge a synchronous commit (no sync
                # standby named, or a named one streams in sync)
                cur.execute("SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'),"
                            " (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))")
                rec, ssn, nsync = cur.fetchone()
                state[port] = (not rec, not rec and (ssn.strip() == "" or nsync > 0), time.time())
            except Exception:
                state[port] = (False, False, time.time())
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                conn = None
                stop.wait(0.05)
            stop.wait(0.02)

    for p in ports:
        threading.Thread(target=watch, args=(p,), daemon=True).start()
    with open(dual_path, "a") as dual:
        while not stop.is_set():
            now = time.time()
            # a node counts as primary on an answer at most 0.2 s old
            prim = [p for p, (is_p, _, at) in state.items() if is_p and now - at < 0.2]
            writ = [p for p, (_, is_w, at) in state.items() if is_w and now - at < 0.2]
            samples[0] += 1
            if len(prim) > 1:
                samples[1] += 1
                if len(writ) > 1:
                    samples[2] += 1
                dual.write("%.3f primaries=%s writable=%s\n" % (now, ",".join(map(str, prim)), ",".join(map(str, writ))))
                dual.flush()
            stop.wait(0.02)


def run(args):
    os.makedirs(args.dir, exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.__setitem__(0, True))
    deadline = time.time() + 30
    while True:
        try:
            c = connect(args.port)
            c.cursor().execute("CREATE TABLE IF NOT EXISTS %s (id bigint PRIMARY KEY, at timestamptz DEFAULT now())"
                               % args.table)
            c.close()
            break
        except Exception as e:
            if time.time() > deadline:
                sys.exit("writer.py: cannot create table %s through 127.0.0.1:%d: %s" % (args.table, args.port, e))
            time.sleep(0.2)
    samples = [0, 0, 0]
    ports = [int(p) for p in args.pg_ports.split(",") if p]
    if ports:
        threading.Thread(target=monitor, args=(ports, os.path.join(args.dir, "dual"), samples),
                         daemon=True).start()
    committed = open(os.path.join(args.dir, "committed"), "a")
    attempts = open(os.path.join(args.dir, "attempts"), "a")
    end = time.time() + args.duration if args.duration else None
    conn, next_id, outages, fail_start, n_ok, n_fail, fails_in_outage = None, 1, [], None, 0, 0, 0
    next_at = time.time()
    while not stopping[0] and (end is None or time.time() < end):
        t0 = time.time()
        ok = False
        try:
            if conn is None:
                conn = connect(args.port)
            conn.cursor().execute("INSERT INTO %s (id) VALUES (%%s)" % args.table, (next_id,))
            ok = True
        except Exception:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass
            conn = None
        t1 = time.time()
        attempts.write("%.3f %d %s\n" % (t1, next_id, "ok" if ok else "fail"))
        if ok:
            committed.write("%d\n" % next_id)
            committed.flush()
            with open(os.path.join(args.dir, "last_ok.tmp"), "w") as f:
                f.write("%.3f\n" % t1)
            os.replace(os.path.join(args.dir, "last_ok.tmp"), os.path.join(args.dir, "last_ok"))
            n_ok += 1
            if fail_start is not None:
                outages.append({"first_fail": round(fail_start, 3), "first_ok_after": round(t1, 3),
                                "gap_s": round(t1 - fail_start, 3), "failed_attempts": fails_in_outage})
                fail_start = None
        else:
            with open(os.path.join(args.dir, "last_fail.tmp"), "w") as f:
                f.write("%.3f\n" % t1)
            os.replace(os.path.join(args.dir, "last_fail.tmp"), os.path.join(args.dir, "last_fail"))
            n_fail += 1
            if fail_start is None:
                fail_start, fails_in_outage = t0, 0
            fails_in_outage += 1
        next_id += 1
        next_at = max(next_at + args.interval, time.time() - args.interval)
        time.sleep(max(0.0, next_at - time.time()))
    stop.set()
    attempts.close()
    committed.close()
    summary = {"acknowledged": n_ok, "failed": n_fail, "outages": outages,
               "open_outage_since": round(fail_start, 3) if fail_start else None,
               "monitor_samples": samples[0], "dual_primary_samples": samples[1],
               "dual_primary_s": round(samples[1] * 0.02, 3),
               "dual_writable_samples": samples[2], "dual_writable_s": round(samples[2] * 0.02, 3)}
    with open(os.path.join(args.dir, "summary.json"), "w") as f:
        json.dump(summary, f)
    print(json.dumps(summary))


def check(args):
    ids = set()
    with open(os.path.join(args.dir, "committed")) as f:
        ids = {int(line) for line in f if line.strip()}
    deadline = time.time() + 60
    while True:
        try:
            c = connect(args.port, timeout=2)
            cur = c.cursor()
            cur.execute("SELECT id FROM %s" % args.table)
            present = {r[0] for r in cur.fetchall()}
            break
        except Exception as e:
            if time.time() > deadline:
                sys.exit("writer.py check: cannot read %s through 127.0.0.1:%d: %s" % (args.table, args.port, e))
            time.sleep(0.2)
    lost = sorted(ids - present)
    print(json.dumps({"committed": len(ids), "present": len(present), "lost": len(lost), "lost_ids": lost[:20]}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--pg-ports", default="")
    r.add_argument("--dir", required=True)
    r.add_argument("--table", default="writes")
    r.add_argument("--interval", type=float, default=0.01)
    r.add_argument("--duration", type=float, default=0)
    c = sub.add_parser("check")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--dir", required=True)
    c.add_argument("--table", default="writes")
    args = ap.parse_args()
    run(args) if args.cmd == "run" else check(args)


if __name__ == "__main__":
    main()
