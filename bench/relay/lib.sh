# shellcheck shell=bash
# Shared helpers for the relay benchmarks (bench/relay/*.sh); sourced, not run.
#
# Reuses bench/lib.sh for its generic helpers (sql, sqlv, bench_file, median, verdict,
# bench_header, ...) but starts its own kind of cluster: unlike the storage benchmarks,
# these need the relay worker running (outbox.workers = 1), so the cluster is made with
# scripts/pg-env.sh's cluster_* functions with their defaults (127.0.0.1 and a unix socket
# in the work directory).
# Everything runs in the database "postgres", the relay's outbox.database.
#
# Each script: relay_start PORT [extra postgresql.conf lines] -> cluster + extension +
# relay worker up; relay_restart [postgresql.conf lines] -> the same server restarted with
# other restart-only settings (outbox.workers); mock_start -> the Kafka mock (librdkafka's
# mock cluster, 1 broker, on 127.0.0.1), BOOTSTRAP set. On exit (any path) relay_cleanup
# stops what was started here, by pid, and removes the work directory (BENCH_KEEP=1 keeps
# it).

RELAY_BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
. "$RELAY_BENCH_DIR/../lib.sh"

BENCH_DB=postgres
# Debian's python3 (it has python3-psycopg); a pyenv python3 earlier in PATH has not.
PY=${PY:-/usr/bin/python3}
MOCK_BIN="$BENCH_REPO/test/tools/outbox_kafka_mock"
MOCK_PID=""
BOOTSTRAP=""
RELAY_WRAPPER=()      # what relay_start started the server in (relay_restart starts it again so)
RELAY_EXTRA_PIDS=""   # other background processes a script started (killed at exit)

relay_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "${RELAY_SO_MD5:-}" ] && [ "$(relay_so_md5)" != "$RELAY_SO_MD5" ]; then
    echo "WARNING: $(pg_config --pkglibdir)/outbox.so was replaced while this benchmark ran" \
         "(make install elsewhere?): a server that loads the new file can crash, and numbers" \
         "after that moment are not comparable. Run it again." >&2
  fi
  local p
  for p in $RELAY_EXTRA_PIDS; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if [ -n "$BENCH_WORK" ] && [ -d "$BENCH_WORK" ]; then
    cluster_stop "$BENCH_WORK" immediate
  fi
  if [ -n "$MOCK_PID" ]; then
    exec 9>&- 2>/dev/null || true       # end of input: the mock stops
    for _ in $(seq 50); do kill -0 "$MOCK_PID" 2>/dev/null || break; sleep 0.1; done
    kill "$MOCK_PID" 2>/dev/null || true
    wait "$MOCK_PID" 2>/dev/null || true
  fi
  if [ -n "$BENCH_WORK" ] && [ -d "$BENCH_WORK" ]; then
    bench_remove_work "$BENCH_WORK"
  fi
  return $rc
}

# relay_so_md5: checksum and time of the installed libraries (a make install elsewhere during
# a run replaces them under the running server).
relay_so_md5() {
  local d
  d=$(pg_config --pkglibdir)
  stat -c '%Y %i' "$d/outbox.so" "$d/outbox_sink_null.so" "$d/outbox_sink_kafka.so" 2>/dev/null | md5sum | cut -c1-8
}
RELAY_SO_MD5=$(relay_so_md5)

# relay_start PORT [extra postgresql.conf lines...]: a throwaway cluster with outbox
# preloaded and one relay worker in the database postgres; CREATE EXTENSION; waits until
# the worker is attached. Sets BENCH_WORK, BENCH_PORT, RB_DSN, RELAY_PID (RELAY_PIDS: all
# the workers', when the extra lines set outbox.workers), RELAY_WRAPPER.
#
# The server runs on a private snapshot of the installed outbox libraries: a `make install`
# elsewhere during a run (other work on this machine) rewrites them in place, and a server
# that has them mapped then crashes. The snapshot is bind-mounted over the installed files
# in a mount namespace of the server's own (unshare -m, root only); elsewhere nothing
# changes. Without unshare the server uses the installed files.
# RELAY_LIBS=DIR snapshots outbox.so and the two sink libraries of DIR instead (a build of
# another commit, with the same SQL scripts): an A/B of two builds, one run each.
relay_start() {
  BENCH_PORT=$1
  shift
  BENCH_WORK=$(make_workdir)
  trap relay_cleanup EXIT
  trap 'exit 130' INT TERM
  local conf=(
    "shared_preload_libraries = 'outbox'"
    "outbox.database = 'postgres'"
    "outbox.workers = 1"
    "fsync = on"
    "synchronous_commit = on"
    "shared_buffers = 512MB"
    "max_wal_size = 4GB"
    "checkpoint_timeout = 30min"
    "max_connections = 100"
    "$@")
  local libdir f binds=""
  libdir=$(pg_config --pkglibdir)
  cluster_init "$BENCH_WORK" || return 1
  cluster_configure "$BENCH_WORK" "$BENCH_PORT" "${conf[@]}"
  RELAY_WRAPPER=()
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && [ "${RELAY_PRIVATE_LIBS:-1}" = 1 ]; then
    mkdir -p "$BENCH_WORK/lib"
    for f in outbox.so outbox_sink_null.so outbox_sink_kafka.so; do
      cp "${RELAY_LIBS:-$libdir}/$f" "$BENCH_WORK/lib/$f"
      binds="$binds mount --bind '$BENCH_WORK/lib/$f' '$libdir/$f' &&"
    done
    # The other sinks (http, nats, ...), where both the source and the installation have one.
    for f in "$libdir"/outbox_sink_*.so; do
      f=${f##*/}
      case $f in outbox_sink_null.so | outbox_sink_kafka.so) continue ;; esac
      [ -f "${RELAY_LIBS:-$libdir}/$f" ] || continue
      cp "${RELAY_LIBS:-$libdir}/$f" "$BENCH_WORK/lib/$f"
      binds="$binds mount --bind '$BENCH_WORK/lib/$f' '$libdir/$f' &&"
    done
    chmod 755 "$BENCH_WORK/lib" "$BENCH_WORK"/lib/*.so
    # The mounts are made as root in the new namespace; the server started in it keeps them.
    RELAY_WRAPPER=(unshare --mount --propagation private sh -c "$binds exec \"\$@\"" sh)
    cluster_start "$BENCH_WORK" "${RELAY_WRAPPER[@]}" || return 1
    echo "   libraries: private snapshot (md5 outbox.so $(md5sum "$BENCH_WORK/lib/outbox.so" | cut -c1-8)," \
         "null $(md5sum "$BENCH_WORK/lib/outbox_sink_null.so" | cut -c1-8)," \
         "kafka $(md5sum "$BENCH_WORK/lib/outbox_sink_kafka.so" | cut -c1-8);" \
         "$(cd "$BENCH_WORK/lib" && echo outbox_sink_*.so | sed 's/outbox_sink_\([a-z0-9_]*\)\.so/\1/g')) of ${RELAY_LIBS:-$libdir}," \
         "bind-mounted for this server only"
    RELAY_SO_MD5=""   # a make install elsewhere cannot reach this server
  else
    [ -z "${RELAY_LIBS:-}" ] || { echo "RELAY_LIBS needs root and unshare (a private snapshot)" >&2; return 1; }
    cluster_start "$BENCH_WORK" || return 1
    echo "   libraries: the installed ones (a make install elsewhere during the run would replace them)"
  fi
  sql -c "CREATE EXTENSION outbox"
  RB_DSN="host=$BENCH_WORK port=$BENCH_PORT dbname=$BENCH_DB user=postgres"
  export RB_DSN
  relay_wait_workers || return 1
  echo "   cluster 127.0.0.1:$BENCH_PORT ($BENCH_WORK), relay pid $RELAY_PID"
  echo "   relay settings: $(relay_settings)"
}

# relay_settings: the relay's settings as name=value (outbox.* but the storage ones).
relay_settings() {
  sqlv "SELECT string_agg(replace(name, 'outbox.', '') || '=' || setting || coalesce(unit, ''), ' ' ORDER BY name) FROM pg_settings WHERE name LIKE 'outbox.%' AND name NOT IN ('outbox.max_payload_bytes', 'outbox.partition_interval', 'outbox.retention', 'outbox.premake', 'outbox.rotate_lock_timeout')"
}

# relay_wait_workers: waits (10 s at most) until all outbox.workers relay workers are
# attached. Sets RELAY_PIDS (their pids, by worker number) and RELAY_PID (the first).
relay_wait_workers() {
  local want
  want=$(sqlv "SHOW outbox.workers")
  RELAY_PID=""
  RELAY_PIDS=""
  for _ in $(seq 200); do
    RELAY_PIDS=$(sqlv "SELECT string_agg(pid::text, ' ' ORDER BY worker) FROM outbox._workers() WHERE pid > 0 HAVING count(*) = $want" 2>/dev/null || true)
    [ -n "$RELAY_PIDS" ] && break
    sleep 0.05
  done
  if [ -z "$RELAY_PIDS" ]; then
    echo "the relay workers ($want) did not all attach; server log:" >&2
    tail -n 30 "$BENCH_WORK/server.log" >&2
    return 1
  fi
  RELAY_PID=${RELAY_PIDS%% *}
  export RELAY_PID RELAY_PIDS
}

# relay_restart [SETTING...]: stops the server relay_start made and starts it again as
# relay_start did (on the same private snapshot of the libraries), with these
# postgresql.conf lines in place of those of the previous relay_restart (they come after
# relay_start's: for restart-only settings such as outbox.workers); waits for the relay
# workers (RELAY_PIDS). Events and the sink configuration stay.
relay_restart() {
  local file="$BENCH_WORK/data/relay_restart.conf" line
  grep -q "^include_if_exists = 'relay_restart.conf'" "$BENCH_WORK/data/postgresql.conf" ||
    echo "include_if_exists = 'relay_restart.conf'" >>"$BENCH_WORK/data/postgresql.conf"
  cluster_stop "$BENCH_WORK" fast
  for line in "$@"; do echo "$line"; done >"$file"
  chown postgres: "$file" 2>/dev/null || true
  cluster_start "$BENCH_WORK" "${RELAY_WRAPPER[@]}" || return 1
  relay_wait_workers
}

# mock_start [BROKERS]: the Kafka mock cluster (default 1 broker), as scripts/demo.sh starts
# it. Sets BOOTSTRAP. Its stdin is a fifo held open on fd 9; closing it stops the mock. Start the
# PostgreSQL cluster first, so that the server does not inherit fd 9.
mock_start() {
  # A test tool, not part of `make`.
  make -s -C "$BENCH_REPO" test-tools PG_CONFIG="$PG_CONFIG" || return 1
  mkfifo "$BENCH_WORK/mock.in"
  "$MOCK_BIN" "${1:-1}" <"$BENCH_WORK/mock.in" >"$BENCH_WORK/mock.out" 2>"$BENCH_WORK/mock.log" &
  MOCK_PID=$!
  exec 9>"$BENCH_WORK/mock.in"
  for _ in $(seq 100); do [ -s "$BENCH_WORK/mock.out" ] && break; sleep 0.1; done
  BOOTSTRAP=$(head -n 1 "$BENCH_WORK/mock.out")
  [ -n "$BOOTSTRAP" ] || { echo "the Kafka mock did not start:" >&2; cat "$BENCH_WORK/mock.log" >&2; return 1; }
  export BOOTSTRAP
  echo "   Kafka mock $BOOTSTRAP (pid $MOCK_PID)"
}

# mock_cmd COMMAND...: one command to the Kafka mock (see test/tools/kafka_mock.cpp);
# prints its answer ("ok" or "error ...").
mock_cmd() {
  local before
  before=$(wc -l <"$BENCH_WORK/mock.out")
  echo "$*" >&9
  for _ in $(seq 50); do
    [ "$(wc -l <"$BENCH_WORK/mock.out")" -gt "$before" ] && break
    sleep 0.1
  done
  tail -n 1 "$BENCH_WORK/mock.out"
}

# orders_table_sql: the business table of the writer benchmarks (writers.sh,
# late_commits.sh): each writer transaction inserts an order and enqueues its event.
orders_table_sql() {
  cat <<'SQL'
CREATE TABLE orders (
    id          bigserial     PRIMARY KEY,
    customer_id bigint        NOT NULL,
    total       numeric(12,2) NOT NULL,
    created_at  timestamptz   NOT NULL DEFAULT now()
);
SQL
}

# writer_txn_sql TABLE: the pgbench script of the writer benchmarks (writers.sh,
# writers_alternating.sh): an order INSERT into TABLE and its event (~170 bytes of JSON),
# in one transaction.
writer_txn_sql() {
  cat <<EOF
\set cid random(1, 1000000)
\set sku random(1, 99999)
\set qty random(1, 9)
BEGIN;
INSERT INTO $1 (customer_id, total) VALUES (:cid, :cid % 1000 + 0.99) RETURNING id AS oid \gset
SELECT outbox.enqueue('order', :oid::text, 'OrderPlaced', ('{"order_id": ' || :oid || ', "customer_id": ' || :cid || ', "total": "' || (:cid % 1000) || '.99", "currency": "EUR", "items": [{"sku": "SKU-' || :sku || '", "qty": ' || :qty || '}], "placed_at": "' || now() || '"}')::jsonb);
COMMIT;
EOF
}

# writers_setup: what the steady-writer benchmarks (writers_alternating.sh, partitions.sh)
# start from: the null sink, the orders table, and the writers' pgbench script plain.sql.
writers_setup() {
  sqlv "SELECT outbox.configure_sink('null')" >/dev/null
  orders_table_sql | sql -o /dev/null
  writer_txn_sql orders | bench_file plain.sql >/dev/null
}

# relay_header TITLE [RELAY]: bench_header plus what the relay benchmarks add; RELAY says
# how the relay runs (default: 1 worker).
relay_header() {
  bench_header "$1"
  echo "   relay: ${2:-1 worker (outbox.workers = 1)} in the same cluster; Kafka mock: librdkafka's" \
       "mock cluster, 1 broker, same machine"
  echo "   PostgreSQL servers already running on this machine (not this script's): $(pgrep -u postgres -f '^/usr/lib/postgresql/[0-9]+/bin/postgres -D' 2>/dev/null | wc -l)"
}

# free_port: a TCP port nothing listens on at 127.0.0.1 (the kernel's choice).
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# consumers_install: a copy of test/consumers with its npm packages, in the work directory.
consumers_install() {
  cp -a "$BENCH_REPO/test/consumers" "$BENCH_WORK/consumers"
  (cd "$BENCH_WORK/consumers" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || {
    echo "npm ci failed in a copy of test/consumers (no network?)" >&2
    return 1
  }
}

# receiver_start: the webhook receiver with a fresh signing secret, whose file goes to the
# server's outbox.sink_files_directory; its answers follow $BENCH_WORK/receiver.control (see
# test/consumers/webhook_receiver.js). Sets RECEIVER_PID, RECEIVER_PORT.
receiver_start() {
  local files="$BENCH_WORK/sink_files" secret
  mkdir -m 750 "$files"
  secret="whsec_$(openssl rand -base64 32)"
  (umask 077 && echo "$secret" >"$files/webhook.secret")
  chown -R postgres: "$files" 2>/dev/null || true
  sql -c "ALTER SYSTEM SET outbox.sink_files_directory = '$files'" -c "SELECT pg_reload_conf()" >/dev/null
  RECEIVER_SECRET=$secret
  receiver_run 0 || return 1
  echo "   webhook receiver http://127.0.0.1:$RECEIVER_PORT (pid $RECEIVER_PID, node $(node --version))"
}

# receiver_run PORT: starts the receiver (0: a free port) in the background and waits until it
# listens; sets RECEIVER_PID, RECEIVER_PORT.
receiver_run() {
  rm -f "$BENCH_WORK/receiver.port"
  node "$BENCH_WORK/consumers/webhook_receiver.js" --log "$BENCH_WORK/receiver.log" \
    --port-file "$BENCH_WORK/receiver.port" --port "$1" --secret "$RECEIVER_SECRET" \
    --control "$BENCH_WORK/receiver.control" >>"$BENCH_WORK/receiver.out" 2>&1 9>&- &
  RECEIVER_PID=$!
  RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $RECEIVER_PID"
  for _ in $(seq 100); do [ -s "$BENCH_WORK/receiver.port" ] && break; sleep 0.1; done
  RECEIVER_PORT=$(cat "$BENCH_WORK/receiver.port" 2>/dev/null || true)
  [ -n "$RECEIVER_PORT" ] || { echo "the webhook receiver did not start:" >&2; cat "$BENCH_WORK/receiver.out" >&2; return 1; }
}

# py SUBCOMMAND [args...]: the Python side (psycopg 3) of the benchmarks.
# The article's table comes from bench/lib.sh's naive_table_sql, as in the other benchmarks.
py() {
  NAIVE_TABLE_SQL="$(naive_table_sql outbox_naive)" "$PY" "$RELAY_BENCH_DIR/relaybench.py" "$@"
}

# holder_start: a session that takes a REPEATABLE READ snapshot and stays idle in transaction,
# holding the xmin horizon (application_name horizon_holder); returns once it holds it. Sets
# HOLDER_PID. holder_stop ends it.
holder_start() {
  psql -X -q -h "$BENCH_WORK" -p "$BENCH_PORT" -U postgres -d "$BENCH_DB" \
    -c "SET application_name = 'horizon_holder'" \
    -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM pg_class" \
    -c "SELECT pg_sleep(86400)" >/dev/null 2>&1 &
  HOLDER_PID=$!
  RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $HOLDER_PID"
  for _ in $(seq 100); do
    [ "$(holder_holds)" = 1 ] && return 0
    sleep 0.1
  done
}
# holder_holds: 1 while the holder holds the horizon.
holder_holds() {
  sqlv "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'horizon_holder' AND backend_xmin IS NOT NULL"
}
holder_stop() {
  sqlv "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'horizon_holder'" >/dev/null
  wait "$HOLDER_PID" 2>/dev/null || true
}

# relay_wait_published [SECONDS]: until no event is left unpublished (default 120 s; a
# WARNING after that).
relay_wait_published() {
  local limit=${1:-120}
  for _ in $(seq $((limit * 10))); do
    [ "$(sqlv "SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL")" = 0 ] && return 0
    sleep 0.1
  done
  echo "   WARNING: events still unpublished after $limit s" >&2
}
