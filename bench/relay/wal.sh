#!/usr/bin/env bash
# WAL bytes per delivered event (issue #24: at most 0.6x of 0.5.0's 655 bytes): what the
# enqueue of an event writes, and what its delivery writes, against a hand INSERT into a
# bigserial table (the article's outbox).
#
# N events (default 100,000; QUICK=1: 20,000), one per autocommit transaction from 2 pgbench
# clients, the same ~60-byte payload each:
#   enqueue   outbox.enqueue() while no sink is configured (the relay sends nothing)
#   delivery  after a CHECKPOINT (so the first change of each page after it writes the page
#             whole, as it does once per checkpoint in service), outbox.configure_sink('null')
#             and the time until every event is published: everything the relay wrote
#   hand      INSERT INTO a bigserial table with the article's columns (id, payload jsonb,
#             created_at, published_at) and an index on id; its relay's UPDATEs not counted
# Bytes from pg_current_wal_insert_lsn() around each step, divided by N; CHECKPOINTs are
# outside every step.
#
#   bash bench/relay/wal.sh            # ~1 min
#   QUICK=1 bash bench/relay/wal.sh
# N overrides; RELAY_LIBS=DIR runs another build.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then N=${N:-20000}; else N=${N:-100000}; fi

relay_header "WAL bytes per event: enqueue, delivery, and a hand INSERT"
relay_start 56313
echo "   $N events, one per transaction, 2 clients; null sink"
sql -q -o /dev/null -c "SELECT outbox.unconfigure_sink()"
sql -q -c "CREATE TABLE hand_outbox (id bigserial PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), published_at timestamptz)"
bench_file enqueue.sql >/dev/null <<'EOF'
\set k random(1, 1000)
SELECT outbox.enqueue('order', :k::text, 'OrderPlaced', '{"order_id": 123456, "total": 44.98, "currency": "EUR"}');
EOF
bench_file hand.sql >/dev/null <<'EOF'
\set k random(1, 1000)
INSERT INTO hand_outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', :k::text, 'OrderPlaced', '{"order_id": 123456, "total": 44.98, "currency": "EUR"}');
EOF
per_client=$((N / 2))

# wal_of CMD...: WAL bytes the command made the server write.
wal_of() {
  local lsn
  lsn=$(sqlv "SELECT pg_current_wal_insert_lsn()")
  "$@" >/dev/null
  sqlv "SELECT pg_current_wal_insert_lsn() - '$lsn'::pg_lsn"
}
drain() {
  sql -q -o /dev/null -c "SELECT outbox.configure_sink('null')"
  for _ in $(seq 1200); do
    [ "$(sqlv "SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL")" = 0 ] && return 0
    sleep 0.1
  done
  echo "   WARNING: events still unpublished after 120 s" >&2
}

sql -q -c "CHECKPOINT"
enqueue=$(wal_of pgb -n -c 2 -j 2 -t "$per_client" -f "$BENCH_WORK/enqueue.sql")
sql -q -c "CHECKPOINT"
delivery=$(wal_of drain)
sql -q -c "CHECKPOINT"
hand=$(wal_of pgb -n -c 2 -j 2 -t "$per_client" -f "$BENCH_WORK/hand.sql")
events=$(sqlv "SELECT count(*) FROM outbox.event_status WHERE published_at IS NOT NULL")
[ "$events" = "$N" ] || echo "   WARNING: $events events published, not $N"

per() { awk -v b="$1" -v n="$N" 'BEGIN { printf "%.0f", b / n }'; }
e=$(per "$enqueue")
d=$(per "$delivery")
h=$(per "$hand")
echo
echo "   | step | WAL bytes per event | x hand INSERT |"
echo "   | --- | ---: | ---: |"
echo "   | enqueue | $e | $(ratio "$e" "$h") |"
echo "   | delivery | $d | |"
echo "   | enqueue + delivery | $((e + d)) | $(ratio "$((e + d))" "$h") |"
echo "   | hand INSERT (bigserial) | $h | 1.00 |"
echo
verdict "enqueue + delivery at most 0.6x of 0.5.0's 655 bytes per event: $((e + d)) (0.5.0's, measured at b8dc7ae: enqueue 361, mark 294)" \
  "$([ $((e + d)) -le 393 ] && echo 1 || echo 0)"
