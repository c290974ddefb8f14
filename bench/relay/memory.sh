#!/usr/bin/env bash
# Relay memory: peak RSS of the relay worker while it drains a large backlog of mixed-size
# events, with outbox.batch_max_bytes = 4MB, null sink and Kafka mock (issue #3). The peak
# must not grow with the backlog: 200k events against 1M.
#
# Payloads: 88.7 % ~200 B (the article's order event), 10 % ~2 KB, 1 % ~20 KB, and 0.3 %
# ~100 KB, the big ones in runs of 300 consecutive events every 100,000 (so that batches of
# big events, where outbox.batch_max_bytes must cut the batch, occur in both sizes).
# Before each drain VmHWM of the worker is reset (echo 5 > /proc/<pid>/clear_refs), then
# read again after it: the peak RSS of that drain. RSS of a backend counts the shared
# buffers it touched; RssAnon (its private memory) is sampled every 20 ms alongside.
# shared_buffers is 128MB here (PostgreSQL's default), so that the shared part of the RSS
# is capped well below what a 1M-event table occupies.
#
#   bash bench/relay/memory.sh          # 3 rounds: 200k and 1M events, null and Kafka, ~9 min
#   QUICK=1 bash bench/relay/memory.sh  # 3 rounds: 40k and 200k events, ~2 min
# ROUNDS, SMALL, BIG, BATCH_MAX_BYTES override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-3}; SMALL=${SMALL:-40000}; BIG=${BIG:-200000}
else
  ROUNDS=${ROUNDS:-3}; SMALL=${SMALL:-200000}; BIG=${BIG:-1000000}
fi
BATCH_MAX_BYTES=${BATCH_MAX_BYTES:-4MB}
SB=128MB

relay_header "relay memory: peak RSS of the worker draining $SMALL vs $BIG mixed-size events"
relay_start 56304 "autovacuum = off" "shared_buffers = $SB"
mock_start
echo "   rounds=$ROUNDS, outbox.batch_max_bytes=$BATCH_MAX_BYTES, outbox.batch_size=1000 (default), shared_buffers=$SB"

py memory --bootstrap "$BOOTSTRAP" --rounds "$ROUNDS" --small "$SMALL" --big "$BIG" \
  --batch-max-bytes "$BATCH_MAX_BYTES" --shared-buffers "$SB"
