#!/usr/bin/env bash
# Start or stop a throw-away PostgreSQL for the tests, on a unix socket and port 54329, in /tmp.
# Writes tests/services/postgres.env with SHOAL_TEST_PG_URL for pytest; empty when no PostgreSQL is installed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
envfile="$here/postgres.env"
data=/tmp/shoal-test-pg
port=54329
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bindir" ] || bindir=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "${1:-}" in
  start)
    : > "$envfile"
    if [ ! -x "$bindir/initdb" ]; then echo "postgres: not installed; PostgreSQL suites will be skipped" >&2; exit 0; fi
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then useradd --system postgres; fi
    if [ ! -f "$data/PG_VERSION" ]; then
      rm -rf "$data"; mkdir -p "$data"; [ "$(id -u)" -eq 0 ] && chown postgres "$data"
      as_pg "$bindir/initdb" -D "$data" -U shoal --auth=trust -E UTF8 >/dev/null
    fi
    if ! as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      as_pg "$bindir/pg_ctl" -D "$data" -w -l "$data/log" \
        -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
    fi
    echo "export SHOAL_TEST_PG_URL=postgresql+psycopg://shoal@127.0.0.1:$port/postgres" > "$envfile"
    echo "postgres: running on 127.0.0.1:$port"
    ;;
  stop)
    if [ -x "$bindir/pg_ctl" ] && [ -f "$data/PG_VERSION" ]; then
      as_pg "$bindir/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
    fi
    : > "$envfile"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
