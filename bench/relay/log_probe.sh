#!/usr/bin/env bash
# What the readers of the delivery log pay for asking it one probe per call
# (outbox._delivered_at(), a fresh index scan each: docs/design.md, "One probe, one scan"),
# against the join the views used before, which rescanned one GiST scan and could hide log
# rows (PostgreSQL's GiST).
#
# N events (default 100,000; QUICK=1: 20,000) enqueued by 2 pgbench clients and delivered by
# 4 workers with the null sink (so the log holds what a relay writes, ranges interleaved),
# then, each query 5 times, the median:
#   event_status    SELECT count(*) FROM outbox.event_status WHERE state = 'published'
#   join            the same count through the join the view had before (a LATERAL
#                   subquery on outbox.deliveries with the index scan, LIMIT 1)
#
#   bash bench/relay/log_probe.sh          # ~1 min
#   QUICK=1 bash bench/relay/log_probe.sh
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then N=${N:-20000}; else N=${N:-100000}; fi

relay_header "Delivery log probes: one scan per probe, against the join"
relay_start 56317 "outbox.workers = 4"
echo "   $N events, 2 writers, delivered by 4 workers (null sink)"
sql -q -o /dev/null -c "SELECT outbox.unconfigure_sink()"
bench_file enqueue.sql >/dev/null <<'EOF'
\set k random(1, 1000)
SELECT outbox.enqueue('order', :k::text, 'OrderPlaced', '{"order_id": 123456}');
EOF
pgb -n -c 2 -j 2 -t $((N / 2)) -f "$BENCH_WORK/enqueue.sql" >/dev/null
sql -q -o /dev/null -c "SELECT outbox.configure_sink('null')"
relay_wait_published 300
sql -q -o /dev/null -c "SELECT outbox.unconfigure_sink()"
sql -q -c "VACUUM ANALYZE outbox.deliveries"
echo "   delivery log: $(sqlv "SELECT count(*) || ' rows, ' || sum(pg_catalog.array_length(pg_catalog.regexp_split_to_array(seqs::text, '\),'), 1)) || ' ranges' FROM outbox.deliveries")"

# ms_of SQL: median wall time of 5 runs, in ms.
ms_of() {
  local i t0 t1
  for i in 1 2 3 4 5; do
    t0=$(now_us)
    sqlv "$1" >/dev/null
    t1=$(now_us)
    echo $(((t1 - t0) / 1000))
  done | median
}
join_sql="SELECT count(*) FROM outbox.events e
  LEFT JOIN LATERAL (SELECT d.delivered_at FROM outbox.deliveries d
                      WHERE e.published_at IS NULL AND d.seqs @> e.seq LIMIT 1) l ON true
 WHERE l.delivered_at IS NOT NULL"
published=$(sqlv "SELECT count(*) FROM outbox.event_status WHERE state = 'published'")
[ "$published" = "$N" ] || echo "   WARNING: $published of $N events published" >&2
view_ms=$(ms_of "SELECT count(*) FROM outbox.event_status WHERE state = 'published'")
join_ms=$(ms_of "$join_sql")
printf '   %-14s %8s ms  %5s us per event\n' event_status "$view_ms" "$(awk -v m="$view_ms" -v n="$N" 'BEGIN { printf "%.2f", 1000 * m / n }')"
printf '   %-14s %8s ms  %5s us per event\n' join "$join_ms" "$(awk -v m="$join_ms" -v n="$N" 'BEGIN { printf "%.2f", 1000 * m / n }')"
echo "   event_status / join: $(ratio "$view_ms" "$join_ms")x"
