# shellcheck shell=bash
# Shared helpers for the storage-layer benchmarks; sourced by bench/*.sh.
#
# Each benchmark starts its own throwaway PostgreSQL cluster (scripts/pg-env.sh: as the
# postgres user, in a temp directory that user owns; PG_CONFIG picks the installation),
# listening on a unix socket only (listen_addresses = ''), on its own port. fsync and
# synchronous_commit keep their defaults (on). The cluster is stopped and the directory
# removed on exit, whatever the exit path (BENCH_KEEP=1 keeps the directory).

BENCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/pg-env.sh
. "$BENCH_REPO/scripts/pg-env.sh"

QUICK=${QUICK:-0}
BENCH_WORK=""
BENCH_PORT=""
BENCH_DB=bench

# bench_remove_work DIR: removes a work directory whose servers are stopped, or keeps it
# (BENCH_KEEP=1) and says so.
bench_remove_work() {
  if [ "${BENCH_KEEP:-0}" = 1 ]; then
    echo "(BENCH_KEEP=1: left $1)" >&2
  else
    remove_workdir "$1"
  fi
}

bench_cleanup() {
  local rc=$?
  if [ -n "$BENCH_WORK" ] && [ -d "$BENCH_WORK" ]; then
    cluster_stop "$BENCH_WORK" immediate
    bench_remove_work "$BENCH_WORK"
  fi
  return $rc
}

# bench_start PORT [extra postgresql.conf lines...]: initdb + start; sets BENCH_WORK.
bench_start() {
  BENCH_PORT=$1
  shift
  BENCH_WORK=$(make_workdir)
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  cluster_init "$BENCH_WORK" --locale=C.UTF-8 --no-sync || return 1
  # Preloaded: the relay's settings (outbox.workers and others) can only be defined at
  # server start. No relay worker runs here: these benchmarks measure the storage layer,
  # and a relay would publish and poll the events under test.
  cluster_configure "$BENCH_WORK" "$BENCH_PORT" \
    "listen_addresses = ''" \
    "fsync = on" \
    "synchronous_commit = on" \
    "shared_buffers = 512MB" \
    "max_wal_size = 4GB" \
    "checkpoint_timeout = 30min" \
    "shared_preload_libraries = 'outbox'" \
    "outbox.workers = 0" \
    "log_min_messages = warning" \
    "logging_collector = off" \
    "$@"
  cluster_start "$BENCH_WORK" || return 1
  as_postgres createdb -h "$BENCH_WORK" -p "$BENCH_PORT" "$BENCH_DB"
}

# sql [psql args...]: psql against the bench database, stops on the first error.
sql() {
  as_postgres psql -h "$BENCH_WORK" -p "$BENCH_PORT" -d "$BENCH_DB" -X -q -v ON_ERROR_STOP=1 "$@"
}

# sqlv QUERY: one value, unaligned, no headers.
sqlv() {
  sql -At -c "$1"
}

# pgb [pgbench args...]: pgbench against the bench database (scripts must live in
# $BENCH_WORK, which the postgres user can read).
pgb() {
  as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" "$@" "$BENCH_DB"
}

# bench_mix RESULTS CLIENTS ROUND SECONDS VARIANT...: one pgbench run (-M prepared) that
# picks one of the variants' scripts ($BENCH_WORK/<variant>.sql) at random for every
# transaction (equal weights), so that all of them meet the same disk at the same moments.
# Appends "clients round variant latency_ms tps" per variant to RESULTS. The sessions get
# the caller's PGOPTIONS.
bench_mix() {
  local results=$1 c=$2 r=$3 secs=$4 j v
  shift 4
  j=$((c < 2 ? c : 2))
  local args=() out="$BENCH_WORK/out.$c.$r.$1"
  for v in "$@"; do args+=(-f "$BENCH_WORK/$v.sql@1"); done
  if ! as_postgres env "PGOPTIONS=${PGOPTIONS:-}" pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n \
      -M prepared -c "$c" -j "$j" -T "$secs" "${args[@]}" "$BENCH_DB" >"$out" 2>&1; then
    cat "$out"; exit 1
  fi
  awk -v c="$c" -v r="$r" '
    /^SQL script [0-9]+: / { n = $NF; sub(/.*\//, "", n); sub(/\.sql$/, "", n); tps = "" }
    / - [0-9]+ transactions .*tps = / { t = $0; sub(/.*tps = /, "", t); sub(/\).*/, "", t); tps = t }
    / - latency average = / { if (n != "") print c, r, n, $5, tps }' "$out" >>"$results"
}

# bench_file NAME: path of a file in the work directory; its content comes from stdin.
bench_file() {
  local path="$BENCH_WORK/$1"
  cat >"$path"
  chown postgres: "$path" 2>/dev/null || true
  echo "$path"
}

# median: median of the numbers on stdin (one per line).
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "nan"; exit }
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# now_us: wall clock in microseconds since the epoch (the clock pgbench logs use).
now_us() {
  date +%s%6N
}

# pgbench_tps OUTPUT_FILE: the tps figure of a pgbench run ("without initial connection
# time" on PostgreSQL 15).
pgbench_tps() {
  sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1" | tail -n 1
}

# pgbench_latency OUTPUT_FILE: average latency in ms.
pgbench_latency() {
  sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$1" | tail -n 1
}

# pct A B: 100 * (A / B - 1), one decimal.
pct() {
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", 100 * (a / b - 1) }'
}

# ratio A B: A / B, two decimals.
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

# verdict COND_TEXT OK(0/1): prints "MET" or "MISSED".
verdict() {
  if [ "$2" = 1 ]; then echo "MET     $1"; else echo "MISSED  $1"; fi
}

# cpu_busy_pct: percent of all CPUs busy over one second (from /proc/stat).
cpu_busy_pct() {
  local a b
  a=$(head -n 1 /proc/stat)
  sleep 1
  b=$(head -n 1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x, " "); split(b, y, " ")
    for (i = 2; i <= n; i++) { d = y[i] - x[i]; tot += d; if (i == 5 || i == 6) idle += d }
    printf "%d", (tot > 0) ? 100 * (tot - idle) / tot : 0 }'
}

# bench_wait_quiet SECONDS: wait (at most SECONDS) until the CPU has been under 10 % busy
# for 3 one-second samples in a row. For shared machines: WAIT_QUIET=300 bash bench/...
bench_wait_quiet() {
  local deadline=$(($(date +%s) + $1)) quiet=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if [ "$(cpu_busy_pct)" -lt 10 ]; then quiet=$((quiet + 1)); else quiet=0; fi
    [ "$quiet" -ge 3 ] && return 0
  done
  echo "   (WAIT_QUIET: the machine did not go quiet within $1 s; running anyway)"
}

bench_header() {
  [ "${WAIT_QUIET:-0}" -gt 0 ] && bench_wait_quiet "$WAIT_QUIET"
  echo "== $1"
  echo "   $(pg_config --version), $(nproc) cores, fsync=on, synchronous_commit=on, QUICK=$QUICK"
  echo "   host: $(uname -srm); $(date -u '+%Y-%m-%d %H:%M UTC')"
  local so
  so="$(pg_config --pkglibdir)/outbox.so"
  local busy
  busy=$(cpu_busy_pct)
  echo "   CPU busy before start (other processes, 1 s sample): ${busy}%"
  if [ "$busy" -ge 15 ]; then
    echo "   WARNING: something else is using the CPU; these numbers will be noisy"
  fi
  echo "   outbox: tree $(git -C "$BENCH_REPO" describe --always --dirty 2>/dev/null || echo '?'), installed $so" \
       "$(date -u -r "$so" '+%Y-%m-%d %H:%M UTC' 2>/dev/null) md5 $(md5sum "$so" 2>/dev/null | cut -c1-8)"
}

# history_sql: SQL that creates history(n, lo, hi): n order events with times spread over
# [lo, hi), a UUIDv7-shaped id (time in the first 48 bits, so that the id index grows at
# its right edge as it does with outbox.enqueue()) and a ~200-byte OrderPlaced payload.
history_sql() {
  cat <<'EOF_SQL'
CREATE FUNCTION history(n integer, lo timestamptz, hi timestamptz)
RETURNS TABLE (id uuid, aggregateid text, payload jsonb, ts timestamptz)
LANGUAGE sql AS $$
  SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7'
          || substr(md5(g::text), 1, 3) || '8' || substr(md5(g::text), 4, 15))::uuid,
         (g % 100000 + 1)::text,
         jsonb_build_object('order_id', g, 'customer_id', g % 100000 + 1,
                            'total', (g % 1000) || '.99', 'currency', 'EUR',
                            'items', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (g % 99999),
                                                                          'qty', g % 9 + 1)),
                            'placed_at', t),
         t
    FROM (SELECT g, lo + (hi - lo) * ((g - 1)::float8 / n) AS t FROM generate_series(1, n) g) s
$$;
EOF_SQL
}

# The article's hand-made outbox table: Debezium's columns with a bigserial id.
naive_table_sql() {  # name
  cat <<EOF_SQL
CREATE TABLE $1 (
    id            bigserial PRIMARY KEY,
    aggregatetype varchar(255),
    aggregateid   varchar(255),
    type          varchar(255),
    payload       jsonb,
    created_at    timestamptz DEFAULT now(),
    published_at  timestamptz
);
EOF_SQL
}
