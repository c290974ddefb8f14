#!/usr/bin/env bash
# The cost of outbox.sink_isolation = process (the sink in outbox_sink_host, a child process
# of the relay) against none (the sink inside the relay), in one run, per sink: drain
# throughput of a backlog (events over 1,000 keys, enqueued while no sink is configured) and
# commit -> acknowledgement latency at 200 commits/s. Settings at their defaults otherwise.
#
#   bash bench/relay/isolation.sh            # null and the Kafka mock, 3 rounds, ~4 min
# ROUNDS, ROWS, RATE, SECONDS_PER_RUN, SINKS (null,kafka) override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

relay_header "isolation: outbox.sink_isolation = process against none"
relay_start 56316 "autovacuum = off"
mock_start
"$PY" "$RELAY_BENCH_DIR/isolation.py" --sinks "${SINKS:-null,kafka}" --bootstrap "$BOOTSTRAP" \
  --rounds "${ROUNDS:-3}" --rows "${ROWS:-100000}" --rate "${RATE:-200}" \
  --seconds "${SECONDS_PER_RUN:-10}"
