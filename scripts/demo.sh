#!/usr/bin/env bash
# The main job, end to end, on a throwaway cluster: install what is missing
# (scripts/install-deps.sh: what outbox needs to build and run, not the tests' packages; no
# installed package upgraded without a word), build and install the extension, start a
# receiver for the sink, enqueue events in business transactions, let the relay deliver
# them, read them back with an independent consumer, print outbox.status, and rotate. The
# long phases (apt, the build, npm) print a line when they start, every 25 s, and at the
# end. Run as root on Debian 12:
#   bash scripts/demo.sh                # Kafka: librdkafka's mock cluster (no broker exists
#                                       # for this machine), read back with kcat
#   bash scripts/demo.sh --sink http    # webhooks: test/consumers/webhook_receiver.js
#                                       # verifies each request's signature
#   bash scripts/demo.sh --sink nats    # nats-server -js, read back with the nats npm package
#                                       # (needs outbox_sink_nats.so)
# http and nats run `npm ci` in a copy of test/consumers (the npm registry, or its cache).
# PG_CONFIG=/path/to/pg_config picks another PostgreSQL installation (scripts/pg-env.sh):
# the extension is built for it and installed into it, and its server runs the demo.
# OUTBOX_DEMO_PORT=N: the demo server's port on 127.0.0.1 (default 55432).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

sink=kafka
while [ $# -gt 0 ]; do
  case $1 in
    --sink) sink=${2:-}; shift 2 || { echo "--sink needs a value" >&2; exit 2; } ;;
    --sink=*) sink=${1#--sink=}; shift ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--sink kafka|http|nats]" >&2; exit 2 ;;
  esac
done
case $sink in
  kafka | http | nats) ;;
  *) echo "outbox demo: unknown sink \"$sink\" (kafka, http or nats)" >&2; exit 2 ;;
esac

port=${OUTBOX_DEMO_PORT:-55432}
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "outbox demo: port $port on 127.0.0.1 is in use; pick another: OUTBOX_DEMO_PORT=N bash $0" >&2
  exit 1
fi

# shellcheck source=scripts/progress.sh
. scripts/progress.sh
trap progress_stop EXIT
bash scripts/install-deps.sh
# After install-deps: on a fresh machine there is no pg_config before it.
. scripts/pg-env.sh
# shellcheck source=scripts/demo-sinks.sh
. scripts/demo-sinks.sh
progress_run "outbox demo: build (the extension, its sinks, the Kafka mock)" \
  make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" all test-tools
make -s install PG_CONFIG="$PG_CONFIG" >/dev/null

work=$(make_workdir)
trap 'progress_stop; cluster_stop "$work"; demo_stop; remove_workdir "$work"' EXIT
"sink_start_$sink"
echo "outbox demo: $sink sink, delivering to the $sink_where"

# outbox.database is not set: the relays run in every database that has the extension.
start_cluster "$work" "$port" "shared_preload_libraries = 'outbox'" \
  ${sink_conf[@]+"${sink_conf[@]}"} 3>&-
echo "outbox demo: PostgreSQL $("$PG_CONFIG" --version | awk '{print $2}') on 127.0.0.1:$port ($work)"

psql_demo() { as_postgres psql -X -h "$work" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"; }

psql_demo -v sink="$sink" -v options="$sink_options" <<'SQL'
\echo '--- install, and point the relay at the sink'
CREATE EXTENSION outbox;
SELECT outbox.configure_sink(:'sink', :'options'::jsonb);
CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL);

\echo '--- an application role that may only enqueue (the README grant)'
CREATE ROLE shop LOGIN;
GRANT USAGE ON SCHEMA outbox TO shop;
GRANT EXECUTE ON FUNCTION outbox.enqueue(text, text, text, jsonb, jsonb, uuid),
                          outbox.enqueue_batch(jsonb) TO shop;
GRANT SELECT, INSERT, UPDATE ON orders TO shop;
SET ROLE shop;

\echo '--- business transactions: the order row and its event commit together'
BEGIN;
INSERT INTO orders VALUES (1, 'alice', 42.00);
SELECT outbox.enqueue('order', '1', 'OrderCreated',
                      '{"order_id": 1, "customer": "alice", "total": 42.00}',
                      '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}') AS event_id;
COMMIT;

BEGIN;
UPDATE orders SET total = 40.00 WHERE id = 1;
SELECT cardinality(outbox.enqueue_batch('[
  {"aggregatetype": "order", "aggregateid": "1", "type": "OrderDiscounted", "payload": {"order_id": 1, "total": 40.00}},
  {"aggregatetype": "customer", "aggregateid": "alice", "type": "LoyaltyPointsAdded", "payload": {"points": 40}}
]')) AS events_in_batch;
COMMIT;

\echo '--- a transaction that rolls back leaves no event behind'
BEGIN;
INSERT INTO orders VALUES (2, 'bob', 10.00);
SELECT outbox.enqueue('order', '2', 'OrderCreated', '{"order_id": 2}') IS NOT NULL AS enqueued;
ROLLBACK;

\echo '--- bad input is refused with a clear error and an SQLSTATE'
\set VERBOSITY verbose
\set ON_ERROR_STOP 0
SELECT outbox.enqueue('order', '', 'OrderCreated', '{}');
SELECT outbox.enqueue('order', '3', 'OrderCreated', '{}', '{"retries": 3}');
\set ON_ERROR_STOP 1
\set VERBOSITY default
RESET ROLE;

\echo '--- the relay was woken at each commit and delivered the events'
DO $$
DECLARE
  deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
  WHILE EXISTS (SELECT 1 FROM outbox.event_status WHERE published_at IS NULL) LOOP
    IF clock_timestamp() > deadline THEN
      RAISE EXCEPTION 'events still unpublished after 30 s; the relay says: %',
        (SELECT string_agg(coalesce(last_error, state), '; ') FROM outbox.status);
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT seq, id, aggregatetype, aggregateid, type, published_at - created_at AS delivered_after
  FROM outbox.event_status ORDER BY seq;
SQL

"sink_read_$sink"

psql_demo <<'SQL'
\echo '--- outbox.status: the relay, and the lag (unpublished count and age of the oldest)'
\x on
SELECT * FROM outbox.status;
\x off

\echo '--- partitions, and one rotation (pg_cron would run it every 10 minutes)'
SELECT name, lower_bound, upper_bound FROM outbox.partitions ORDER BY lower_bound;
SELECT * FROM outbox.rotate();
SQL
echo "outbox demo: done"
