#!/usr/bin/env python3
"""A TCP forwarder that can be cut like a network partition (the same behaviour as
tests/common/tcp_cut.rs): one per Patroni node, in front of etcd, so one node can be
cut off from the DCS while everything else keeps running.

    cutproxy.py [HOST:]LISTEN_PORT [HOST:]UPSTREAM_PORT STATE_FILE   (HOST: 127.0.0.1)

A listen host other than 127.0.0.1 (another loopback address, 127.0.1.N) gives a node
an address of its own with the same port as its server: pg_auto_failover's side
(../pg_auto_failover/pgaf.sh) registers each node under such an address, so that what
the other hosts and the monitor send it goes through its proxy.

SIGUSR1 cuts, SIGUSR2 heals (patroni.sh cut N / heal N send them). Cut, it forwards
nothing and closes nothing: bytes already read wait, a new connection is accepted and
hears nothing, the way TCP behaves across a partition; after the heal everything held
goes through. STATE_FILE holds "open" or "cut". Standard library only.
"""
import os
import signal
import socket
import sys
import threading
import time

TICK = 0.01
cut = threading.Event()  # set while cut


def write_state(path):
    with open(path + ".tmp", "w") as f:
        f.write("cut\n" if cut.is_set() else "open\n")
    os.replace(path + ".tmp", path)


def wait_open():
    while cut.is_set():
        time.sleep(TICK)


def pump(src, dst):
    try:
        while True:
            wait_open()
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            wait_open()
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def address(arg):
    """[HOST:]PORT -> (host, port), host 127.0.0.1 when not given."""
    host, _, port = arg.rpartition(":")
    return (host or "127.0.0.1", int(port))


def serve(client, upstream):
    wait_open()
    try:
        up = socket.create_connection(upstream, timeout=5)
        up.settimeout(None)
    except OSError:
        client.close()
        return
    for s in (client, up):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(client, up), daemon=True).start()
    threading.Thread(target=pump, args=(up, client), daemon=True).start()


def main():
    listen, upstream, state = address(sys.argv[1]), address(sys.argv[2]), sys.argv[3]

    def on_signal(signum, _frame):
        if signum == signal.SIGUSR1:
            cut.set()
        else:
            cut.clear()
        write_state(state)

    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGUSR2, on_signal)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(listen)
    srv.listen(128)
    write_state(state)
    while True:
        try:
            client, _ = srv.accept()
        except InterruptedError:
            continue
        threading.Thread(target=serve, args=(client, upstream), daemon=True).start()


if __name__ == "__main__":
    main()
