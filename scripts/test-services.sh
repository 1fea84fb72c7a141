#!/usr/bin/env bash
# Installs (when missing) and starts what the tests talk to over real connections:
# a PostgreSQL server on a loopback port and Debian's headless Chromium; and
# bubblewrap, the sandbox the isolation tests run for real.
# Writes .test-services.env with the URLs the tests read. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
action="${1:-start}"
# Each checkout gets its own PostgreSQL: a port and a data folder derived from the
# checkout's path, so two checkouts (or CI beside a developer) never share a server.
checkout_hash="$(pwd | cksum | cut -d' ' -f1)"
PG_PORT="${BENCHWARDEN_TEST_PG_PORT:-$((20000 + checkout_hash % 12000))}"
STATE_DIR="$(pwd)/.test-services"
PG_DIR="${BENCHWARDEN_TEST_PG_DIR:-$STATE_DIR/pg}"
STARTED_MARK="$STATE_DIR/pg-started-here"
ENV_FILE=".test-services.env"

need_apt=()
pg_bin=""
for candidate in /usr/lib/postgresql/*/bin; do
  [ -x "$candidate/initdb" ] && pg_bin="$candidate"
done
[ -n "$pg_bin" ] || need_apt+=(postgresql)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# The OS-level boundary for agent commands, trial servers and ladder challengers.
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
if [ "$action" = start ] && [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "test-services: missing ${need_apt[*]}; install them with apt-get as root" >&2
  fi
  for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/initdb" ] && pg_bin="$candidate"
  done
fi

run_as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$action" in
  start)
    mkdir -p "$STATE_DIR"
    if [ -n "$pg_bin" ]; then
      # The postgres user must reach the data folder; when a parent of the checkout is
      # closed to it, fall back to a per-checkout folder under /tmp.
      if [ -z "${BENCHWARDEN_TEST_PG_DIR:-}" ] && [ "$(id -u)" = 0 ] && \
         ! runuser -u postgres -- test -x "$STATE_DIR" 2>/dev/null; then
        PG_DIR="/tmp/benchwarden-test-pg-$checkout_hash"
      fi
      if ! run_as_pg "$pg_bin/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; then
        rm -rf "$PG_DIR"
        mkdir -p "$PG_DIR"
        [ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_DIR"
        run_as_pg "$pg_bin/initdb" -D "$PG_DIR" -U postgres --auth=trust >/dev/null
        # Unix sockets in /tmp: a deep checkout path would exceed the socket name limit.
        run_as_pg "$pg_bin/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w \
          -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1" start >/dev/null
        echo "$PG_DIR" > "$STARTED_MARK"
      fi
      echo "export BENCHWARDEN_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:$PG_PORT/postgres" > "$ENV_FILE"
    else
      : > "$ENV_FILE"
    fi
    command -v chromium >/dev/null 2>&1 && echo "export BENCHWARDEN_TEST_CHROMIUM=$(command -v chromium)" >> "$ENV_FILE"
    cat "$ENV_FILE"
    ;;
  stop)
    # Only a server this checkout's `start` launched is stopped; one a developer started
    # by hand keeps running.
    if [ -n "$pg_bin" ] && [ -f "$STARTED_MARK" ]; then
      run_as_pg "$pg_bin/pg_ctl" -D "$(cat "$STARTED_MARK")" stop -m fast >/dev/null 2>&1 || true
      rm -f "$STARTED_MARK"
    fi
    rm -f "$ENV_FILE"
    ;;
esac
