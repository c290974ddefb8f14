#!/usr/bin/env bash
# Draining a backlog: the relay against PgQ's batch read (issue #24: at least 1.0x PgQ),
# side by side in one cluster, in alternating order.
#
# Each round, the same ROWS events (default 200,000; QUICK=1: 50,000) over 1000 keys, the
# payload {"n": g}:
#   relay  outbox.enqueue() of the backlog while no sink is configured, then
#          configure_sink('null') and the time from its commit until no event is unpublished
#          (relaybench.py backlog, as workers.sh; outbox.batch_size 1000, every other
#          setting at its default)
#   pgq    pgq.insert_event() of the backlog in transactions of BATCH (1000) events, each
#          followed by a tick (pgq.force_tick + pgq.ticker), so that a batch holds BATCH
#          events; then a consumer drains it in a server-side procedure: next_batch,
#          get_batch_events (every column of every event, counted), finish_batch and COMMIT,
#          until next_batch says there is no batch (postgresql-15-pgq3; PgQ's consumers run
#          this loop from a client, so this is its fastest read)
# Both read every event from the table and commit once per batch of 1000; the relay also
# turns each payload into text and hands it to the sink, and records the delivery. Reported:
# events/s per variant (median of ROUNDS, 3; QUICK=1: 2) and the median of the per-round
# ratios relay / pgq.
#
#   bash bench/relay/peers.sh            # ~2 min
#   QUICK=1 bash bench/relay/peers.sh
# ROWS, ROUNDS, BATCH override; RELAY_LIBS=DIR runs another build. Installs postgresql-15-pgq3
# when it is missing (as root).
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then ROUNDS=${ROUNDS:-2}; ROWS=${ROWS:-50000}; else ROUNDS=${ROUNDS:-3}; ROWS=${ROWS:-200000}; fi
BATCH=${BATCH:-1000}
major=$(pg_config --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
if [ ! -f "$(pg_config --sharedir)/extension/pgq.control" ]; then
  [ "$(id -u)" = 0 ] || { echo "PgQ is missing: apt-get install postgresql-$major-pgq3" >&2; exit 1; }
  apt-get install -y -qq "postgresql-$major-pgq3" >/dev/null
fi

relay_header "draining a backlog: the relay against PgQ's batch read"
relay_start 56314 "autovacuum = off"
echo "   rounds=$ROUNDS; $ROWS events over 1000 keys per drain; batches of $BATCH"
sql -q -c "CREATE EXTENSION pgq"
sql -q -o /dev/null -c "SELECT pgq.create_queue('bench')"
sql -q -o /dev/null -c "SELECT pgq.register_consumer('bench', 'drain')"
sql -q <<'EOF'
CREATE TABLE pgq_result (events bigint, seconds float8);
-- A consumer's loop, server-side: a batch, its events (counted: every row is read and
-- returned), finish_batch, COMMIT; until there is no batch.
CREATE PROCEDURE pgq_drain() LANGUAGE plpgsql AS $$
DECLARE
  b bigint;
  n bigint := 0;
  t0 timestamptz := clock_timestamp();
BEGIN
  LOOP
    b := pgq.next_batch('bench', 'drain');
    EXIT WHEN b IS NULL;
    n := n + (SELECT count(*) FROM pgq.get_batch_events(b) e WHERE e.ev_data IS NOT NULL);
    PERFORM pgq.finish_batch(b);
    COMMIT;
  END LOOP;
  INSERT INTO pgq_result VALUES (n, extract(epoch FROM clock_timestamp() - t0));
  COMMIT;
END $$;
EOF

# pgq_fill: the backlog, BATCH events per transaction, a tick after each.
pgq_fill() {
  local from=1
  {
    while [ "$from" -le "$ROWS" ]; do
      local to=$((from + BATCH - 1))
      [ "$to" -gt "$ROWS" ] && to=$ROWS
      echo "SELECT count(pgq.insert_event('bench', 'Tick', jsonb_build_object('n', g)::text, 'k' || lpad((g % 1000 + 1)::text, 4, '0'), NULL, NULL, NULL)) FROM generate_series($from, $to) g;"
      echo "SELECT pgq.force_tick('bench'); SELECT pgq.ticker('bench');"
      from=$((to + 1))
    done
  } | sql -q -o /dev/null
  sql -q -c "CHECKPOINT"
}

results="$BENCH_WORK/peers.txt"
: >"$results"
drain_relay() {
  local line
  py backlog --rows "$ROWS" --keys 1000 --options '{}' --poll-ms 10 --timeout 300 \
    --label relay --round "$1" --out "$BENCH_WORK/relay.txt"
  line=$(tail -n 1 "$BENCH_WORK/relay.txt")
  echo "$1 relay $(echo "$line" | awk '{ print $3 }')" >>"$results"
}
drain_pgq() {
  local n s
  pgq_fill
  sql -q -c "TRUNCATE pgq_result"
  sql -q -c "CALL pgq_drain()"
  read -r n s < <(sqlv "SELECT events, seconds FROM pgq_result" | tr '|' ' ')
  [ "$n" = "$ROWS" ] || echo "      WARNING: PgQ read $n events, not $ROWS"
  printf '      %-26s %8.0f events/s  %6.2f s\n' pgq "$(awk -v n="$n" -v s="$s" 'BEGIN { print n / s }')" "$s"
  echo "$1 pgq $(awk -v n="$n" -v s="$s" 'BEGIN { printf "%.1f", n / s }')" >>"$results"
}

echo "   warm-up (not counted):"
drain_relay warm-up
drain_pgq warm-up
for r in $(seq "$ROUNDS"); do
  echo "   round $r/$ROUNDS:"
  if [ $((r % 2)) = 1 ]; then drain_relay "$r"; drain_pgq "$r"; else drain_pgq "$r"; drain_relay "$r"; fi
done

echo
echo "-- results: medians of $ROUNDS rounds, $ROWS events per drain"
relay=$(awk '$1 != "warm-up" && $2 == "relay" { print $3 }' "$results" | median)
pgq=$(awk '$1 != "warm-up" && $2 == "pgq" { print $3 }' "$results" | median)
ratios=$(awk '$1 != "warm-up" { v[$1 " " $2] = $3; r[$1] = 1 }
  END { for (k in r) if (v[k " pgq"] > 0) print v[k " relay"] / v[k " pgq"] }' "$results" | sort -n)
ratio=$(echo "$ratios" | median | awk '{ printf "%.2f", $1 }')
echo "   | variant | events/s |"
echo "   | --- | ---: |"
printf '   | relay (null sink) | %.0f |\n' "$relay"
printf "   | PgQ's batch read | %.0f |\n" "$pgq"
printf '   relay / PgQ: %sx (rounds %s)\n' "$ratio" "$(echo "$ratios" | awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $1 }')"
echo
verdict "the relay drains at least as fast as PgQ's batch read (${ratio}x)" \
  "$(awk -v r="$ratio" 'BEGIN { print (r >= 1.0 ? 1 : 0) }')"
