#!/usr/bin/env bash
# outbox.enqueue_batch() of 1,000 events, on one or more installations side by side in one
# run (issue #44: the writer's path before and after a change). One throwaway cluster per
# installation, all started at once; each round runs every installation in turn, the order
# alternating (A B, then B A), so that a build or a test suite running alongside falls on each
# alike: many short rounds (about a second each) pair better than a few long ones. Each call is one transaction, rolled back: the server's CPU per call, without the
# commit's fsync (which the change does not touch and which wanders by tens of percent here).
# VACUUM of outbox.events before each run keeps the rolled-back rows from piling up.
#
# Installations: INSTALLS, name=pg_config pairs (outbox built and installed into each, e.g. by
# scripts/install-into.sh or tap.sh); the first is the reference of the ratios. By default
# PG_CONFIG's (or pg_config's) installation alone.
#
#   INSTALLS="before=/opt/pgc/h4/usr/lib/postgresql/15/bin/pg_config after=/opt/pgc/h3/usr/lib/postgresql/15/bin/pg_config" \
#     bash bench/enqueue_batch.sh
#   ROUNDS=31 CALLS=60 EVENTS=1000 ...     # rounds, calls per run, events per call (defaults)
#   QUICK=1 ...                             # 9 rounds of 30 calls
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

ROUNDS=${ROUNDS:-31}
CALLS=${CALLS:-60}
EVENTS=${EVENTS:-1000}
if [ "$QUICK" = 1 ]; then
  ROUNDS=9
  CALLS=30
fi
INSTALLS=${INSTALLS:-"outbox=$PG_CONFIG"}
read -r -a installs <<<"$INSTALLS"

bench_header "enqueue_batch.sh: outbox.enqueue_batch() of $EVENTS events, $ROUNDS rounds of $CALLS calls per installation"
for i in "${!installs[@]}"; do
  pgc=${installs[$i]#*=}
  so="$("$pgc" --pkglibdir)/outbox.so"
  echo "   ${installs[$i]%%=*}: $("$pgc" --version), $so $(date -u -r "$so" '+%Y-%m-%d %H:%M UTC') md5 $(md5sum "$so" | cut -c1-8)"
done

# One cluster per installation: work directory works[i], port 55351 + i. pg_ctl and initdb
# are the installation's own, so that the server loads its outbox.so.
works=()
cleanup() {
  local w
  for w in "${works[@]}"; do
    cluster_stop "$w" immediate
    bench_remove_work "$w"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# in_install I CMD...: CMD with installation I's programs first in PATH.
in_install() {
  local i=$1
  shift
  PATH="$("${installs[$i]#*=}" --bindir):$PATH" "$@"
}
# isql I [psql args...]: psql against installation I's cluster.
isql() {
  local i=$1
  shift
  in_install "$i" as_postgres psql -h "${works[$i]}" -p $((55351 + i)) -d "$BENCH_DB" -X -q \
    -v ON_ERROR_STOP=1 "$@"
}

for i in "${!installs[@]}"; do
  works[i]=$(make_workdir)
  in_install "$i" cluster_init "${works[$i]}" --locale=C.UTF-8 --no-sync
  cluster_configure "${works[$i]}" $((55351 + i)) \
    "listen_addresses = ''" "fsync = on" "synchronous_commit = on" "shared_buffers = 512MB" \
    "max_wal_size = 4GB" "checkpoint_timeout = 30min" "autovacuum = off" \
    "shared_preload_libraries = 'outbox'" "outbox.workers = 0" "log_min_messages = warning"
  in_install "$i" cluster_start "${works[$i]}"
  in_install "$i" as_postgres createdb -h "${works[$i]}" -p $((55351 + i)) "$BENCH_DB"
  # The batch: OrderPlaced events (~170 bytes of payload) as cost.sh's, stored once.
  isql "$i" <<EOF
CREATE EXTENSION outbox;
CREATE TABLE bench_batch AS
SELECT jsonb_agg(jsonb_build_object(
         'aggregatetype', 'order', 'aggregateid', g::text, 'type', 'OrderPlaced',
         'payload', jsonb_build_object('order_id', g, 'customer_id', g % 1000 + 1,
                                       'total', (g % 1000) || '.99', 'currency', 'EUR',
                                       'items', jsonb_build_array(jsonb_build_object(
                                                  'sku', 'SKU-' || g, 'qty', g % 9 + 1)),
                                       'placed_at', now()))) AS events
  FROM generate_series(1, $EVENTS) g;
EOF
  printf 'BEGIN;\nSELECT pg_catalog.cardinality(outbox.enqueue_batch(events)) FROM bench_batch;\nROLLBACK;\n' \
    >"${works[$i]}/batch.sql"
  chown postgres: "${works[$i]}/batch.sql" 2>/dev/null || true
  # Warm up: the function's plans, the partition's pages.
  in_install "$i" as_postgres pgbench -h "${works[$i]}" -p $((55351 + i)) -n -M prepared -t 10 \
    -f "${works[$i]}/batch.sql" "$BENCH_DB" >/dev/null
done

results=$(mktemp)
trap 'rm -f "$results"; cleanup' EXIT
for r in $(seq 1 "$ROUNDS"); do
  order=("${!installs[@]}")
  if [ $((r % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#installs[@]} - 1; i >= 0; i--)); do order+=("$i"); done
  fi
  for i in "${order[@]}"; do
    isql "$i" -c 'VACUUM outbox.events' -c 'CHECKPOINT'
    out=$(in_install "$i" as_postgres pgbench -h "${works[$i]}" -p $((55351 + i)) -n -M prepared \
      -t "$CALLS" -f "${works[$i]}/batch.sql" "$BENCH_DB" 2>&1) || { echo "$out"; exit 1; }
    ms=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$out")
    echo "$r $i $ms" >>"$results"
    printf '   round %d: %-10s %8.2f ms per call\n' "$r" "${installs[$i]%%=*}" "$ms"
  done
done

verdicts=()
echo
echo "-- results: ms per call of $EVENTS events (median of $ROUNDS rounds; per event in us);"
echo "   against ${installs[0]%%=*}: the median of the per-round ratios"
for i in "${!installs[@]}"; do
  ms=$(awk -v i="$i" '$2 == i { print $3 }' "$results" | median)
  lo=$(awk -v i="$i" '$2 == i { print $3 }' "$results" | sort -g | head -n 1)
  hi=$(awk -v i="$i" '$2 == i { print $3 }' "$results" | sort -g | tail -n 1)
  line=$(printf '   %-10s %8.2f ms (%.2f-%.2f)  %6.2f us per event' "${installs[$i]%%=*}" "$ms" "$lo" "$hi" \
    "$(awk -v ms="$ms" -v n="$EVENTS" 'BEGIN { print 1000 * ms / n }')")
  if [ "$i" -gt 0 ]; then
    x=$(awk -v i="$i" '$2 == 0 { ref[$1] = $3 } $2 == i { v[$1] = $3 }
          END { for (r in v) if (ref[r] > 0) print v[r] / ref[r] }' "$results" | median)
    line+=$(printf '  %s / %s: %.3fx' "${installs[$i]%%=*}" "${installs[0]%%=*}" "$x")
    verdicts+=("$(verdict "${installs[$i]%%=*} not slower than ${installs[0]%%=*} (3-point noise band; measured $(printf '%.3f' "$x")x)" \
      "$(awk -v x="$x" 'BEGIN { print (x <= 1.03) ? 1 : 0 }')")")
  fi
  echo "$line"
done
if [ ${#verdicts[@]} -gt 0 ]; then
  echo
  echo "-- target (issue #44: enqueue_batch not slower after the change)"
  printf '%s\n' "${verdicts[@]}"
fi
