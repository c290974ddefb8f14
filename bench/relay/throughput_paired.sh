#!/usr/bin/env bash
# The throughput target alone, measured in pairs (issue #3; target: the relay worker at batch
# 1000 drains a backlog at least 2x as fast as the article's SQL run as a server-side loop).
#
# throughput.sh runs fifteen variants per round, so the two drains the target compares
# are minutes apart, and on this machine a 200,000-event drain (about a second) moves by
# +-25 % from one to the next with nothing changed: single rounds of the ratio spread from
# 1.2x to 2.9x. Here each cycle runs three drains of ROWS events back to back:
#   worker    the relay worker, null sink, outbox.batch_size = 1000
#   server    the same SQL as throughput.sh's server-side loop (plpgsql, COMMIT per batch)
#   control   the server-side loop again: the A/A control, the method's own error
# in the balanced order of writers_alternating.sh (cycle c runs rotation c of the list,
# mirrored every second set of three cycles). Each drain is set up as in throughput.sh:
# TRUNCATE, fill, ANALYZE, CHECKPOINT; the worker's clock runs from the commit of
# configure_sink() until its counters say the backlog is sent. Per cycle: worker / server
# and control / server; the result is the median of those ratios, with quartiles, and
# their mean with its 95 % interval (relaybench.py paired).
#
#   bash bench/relay/throughput_paired.sh          # 30 cycles of 300,000 events, ~12 min
#   QUICK=1 bash bench/relay/throughput_paired.sh  # 5 cycles of 100,000 events, ~2 min
# CYCLES, ROWS override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  CYCLES=${CYCLES:-5}; ROWS=${ROWS:-100000}
else
  CYCLES=${CYCLES:-30}; ROWS=${ROWS:-300000}
fi

relay_header "relay throughput target: worker vs server-side loop at batch 1000, paired cycles"
# autovacuum off, as in throughput.sh: every drain starts from a TRUNCATE.
relay_start 56307 "autovacuum = off"
echo "   cycles=$CYCLES of three $ROWS-event drains (worker, server loop, server loop again)"

py paired --rows "$ROWS" --cycles "$CYCLES" --batch 1000
