#!/usr/bin/env bash
# Installs what the Patroni side of the comparison runs (issue 39): Patroni 4.1 from PyPI
# in a Python venv, and etcd 3.4 (Debian's etcd-server, etcd-client) when missing.
#
#   install.sh [VENV]     VENV defaults to target/patroni-venv in the repository
#
# Patroni comes from PyPI, not from Debian: bookworm's patroni package is 3.0.2, whose
# etcd3 code overwrites the leader key unconditionally and loses acknowledged commits
# after a paused primary wakes up (README.md here, "Patroni 3.0.2 and etcd3"; fixed in
# 3.0.3). Extras: `etcd3` (Patroni's v3 client talks to etcd's JSON gateway itself; the
# extra brings python-etcd, which Patroni 4.1 still imports for its etcd modules) and
# `psycopg2-binary` (the PostgreSQL driver, prebuilt: no compiler or libpq headers).
#
# The venv is made from Debian's /usr/bin/python3 (python3-venv) when it exists, so
# that the `postgres` user patroni.sh runs Patroni as can use it (a pyenv interpreter
# under /root cannot be reached by that user). Idempotent: a venv that already has
# Patroni 4.1 is kept. Prints the venv's patroni path last.
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
repo=$(cd -- "$here/../../.." && pwd)
venv=${1:-$repo/target/patroni-venv}
SPEC='patroni[etcd3,psycopg2-binary]==4.1.*'

die() { echo "install.sh: $*" >&2; exit 1; }

apt_install() { # PACKAGE...
    [ "$(id -u)" = 0 ] || die "not root: install $* yourself (apt-get install -y $*)"
    command -v apt-get >/dev/null || die "no apt-get: install $* yourself"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    echo "== etcd 3.4 (Debian's etcd-server, etcd-client)"
    apt_install etcd-server etcd-client
fi

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || true)
[ -n "$py" ] || die "no python3 (apt-get install -y python3 python3-venv)"
"$py" -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv

if [ -x "$venv/bin/patroni" ] && "$venv/bin/patroni" --version 2>/dev/null | grep -q ' 4\.1\.'; then
    echo "== $("$venv/bin/patroni" --version) already in $venv"
else
    echo "== $SPEC into $venv"
    mkdir -p "$(dirname "$venv")"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "$SPEC"
    "$venv/bin/patroni" --version
fi
# patroni.sh runs Patroni as the postgres user: it must read and run the venv
chmod -R a+rX "$venv"
echo "$venv/bin/patroni"
