#!/usr/bin/env bash
# Installs what the pg_auto_failover side of the comparison runs (issue 39): Debian's
# postgresql-15-auto-failover (pg_auto_failover 2.0: `pg_autoctl` and the monitor's
# `pgautofailover` extension for PostgreSQL 15), when missing.
#
#   install.sh
#
# pg_autoctl lands in /usr/bin (package pg-auto-failover-cli, pulled in); it finds
# PostgreSQL 15's pg_ctl through the --pgctl option pgaf.sh passes. Idempotent.
set -euo pipefail
if command -v pg_autoctl >/dev/null && [ -f /usr/share/postgresql/15/extension/pgautofailover.control ]; then
    echo "== $(pg_autoctl version 2>/dev/null | head -n 1) already installed"
    exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install.sh: not root: apt-get install -y postgresql-15-auto-failover yourself" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-auto-failover
pg_autoctl version | head -n 1
