#!/usr/bin/env bash
# The latency curve: commit -> published at 200, 800, 2,000, 5,000 and 20,000 commits/s, from 4
# and 16 clients, null sink and Kafka mock (1-partition topic, the sink's defaults), and the
# relay's CPU per event at each rate (issue #24: p50 <= 2 ms and p99 <= 10 ms up to 2,000
# commits/s).
#
# Writers: pgbench -R (commits at the times of a Poisson process, so bursts and lulls), one
# outbox.enqueue() per autocommit transaction, at the server's defaults (synchronous_commit
# on): a rate the disk cannot give is reported as the rate pgbench reached. Latency: from the
# moment COMMIT returned to pgbench (its per-transaction log, -l) to published_at (the relay's
# clock right after the sink's acknowledgement), same machine, same clock. Each client's
# events carry its client_id as the key, so its k-th event (in seq order) is its transaction number k
# transaction of the log.
# Relay CPU: the relay process's CPU time (all threads, /proc/PID/task/*/schedstat) over the
# run, per event.
# Variants, side by side for each rate and client count, alternating:
#   adaptive  outbox.min_batch_interval at its default: commits gather only while a batch per
#             commit would cost the relay more than a quarter of a core (docs/design.md)
#   every     outbox.min_batch_interval = 0: a batch per wake-up, whatever it costs
#
#   bash bench/relay/latency_curve.sh            # 6 s per run, ~12 min
#   QUICK=1 bash bench/relay/latency_curve.sh    # 2 s per run, ~5 min
# SECONDS_PER_RUN, RATES, CLIENTS, SINKS, WORKERS (outbox.workers, 1) override; RELAY_LIBS=DIR
# runs another build. With several workers, relay CPU is all of theirs.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}; else SECONDS_PER_RUN=${SECONDS_PER_RUN:-6}; fi
RATES=${RATES:-"200 800 2000 5000 20000"}
CLIENTS=${CLIENTS:-"4 16"}
SINKS=${SINKS:-"null kafka"}

relay_header "relay latency curve: commit -> published by commit rate, clients and sink"
WORKERS=${WORKERS:-1}
relay_start 56310 "outbox.workers = $WORKERS"
mock_start
echo "   $SECONDS_PER_RUN s per run; rates $RATES; clients $CLIENTS; sinks $SINKS; $WORKERS relay worker(s)"
sql -q -c "CREATE TABLE pgbench_log (client int, txn int, latency_us bigint, script int, epoch bigint, us int, lag_us bigint)"
bench_file enqueue.sql >/dev/null <<'EOF'
SELECT outbox.enqueue('lat' || :run, :client_id::text, 'T', '{"n": 1}');
EOF

# relay_cpu_ns: the relay workers' CPU time so far, all their threads.
relay_cpu_ns() {
  local pid
  for pid in $RELAY_PIDS; do cat /proc/"$pid"/task/*/schedstat 2>/dev/null; done |
    awk '{ s += $1 } END { printf "%.0f", s }'
}


set_gather() {  # adaptive | every
  if [ "$1" = every ]; then
    sql -q -c "ALTER SYSTEM SET outbox.min_batch_interval = 0"
  else
    sql -q -c "ALTER SYSTEM RESET outbox.min_batch_interval"
  fi
  sqlv "SELECT pg_reload_conf()" >/dev/null
  sleep 0.3
}

results="$BENCH_WORK/curve.txt"
: >"$results"
run=0
for sink in $SINKS; do
  if [ "$sink" = kafka ]; then
    [ "$(mock_cmd create_topic outbox.event.lat 1)" = ok ] || echo "   WARNING: create_topic failed"
    sql -q -c "SELECT outbox.configure_sink('kafka', '{\"bootstrap.servers\": \"$BOOTSTRAP\", \"topic.template\": \"outbox.event.lat\"}')"
  else
    sql -q -c "SELECT outbox.configure_sink('null')"
  fi
  for clients in $CLIENTS; do
    for rate in $RATES; do
      for gather in adaptive every; do
        run=$((run + 1))
        set_gather "$gather"
        relay_wait_published 60
        relay_wait_workers
        pid0=$RELAY_PIDS
        cpu0=$(relay_cpu_ns)
        rm -f "$BENCH_WORK"/pgl.*
        pgb -n -c "$clients" -j 2 -R "$rate" -T "$SECONDS_PER_RUN" -D run="$run" \
          -l --log-prefix="$BENCH_WORK/pgl" -f "$BENCH_WORK/enqueue.sql" >"$BENCH_WORK/pgbench.out" 2>&1 || true
        relay_wait_published 60
        sql -q -c "TRUNCATE pgbench_log"
        cat "$BENCH_WORK"/pgl.* | sql -q -c "\\copy pgbench_log FROM pstdin (FORMAT text, DELIMITER ' ')"
        cpu1=$(relay_cpu_ns)
        relay_wait_workers
        [ "$RELAY_PIDS" = "$pid0" ] || { echo "   WARNING: a relay worker restarted during the run ($pid0 -> $RELAY_PIDS)"; cpu1=$cpu0; }
        tps=$(pgbench_tps "$BENCH_WORK/pgbench.out")
        read -r n p50 p99 pmax < <(sqlv "
          SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 2),
                 round(percentile_cont(0.99) WITHIN GROUP (ORDER BY d)::numeric, 2),
                 round(max(d)::numeric, 1)
            FROM (SELECT (extract(epoch FROM e.published_at) - (l.epoch + l.us / 1e6)) * 1000 AS d
                    FROM (SELECT aggregateid::int AS client, published_at,
                                 row_number() OVER (PARTITION BY aggregateid ORDER BY seq) AS txn
                            FROM outbox.event_status WHERE aggregatetype = 'lat$run') e
                    JOIN pgbench_log l USING (client, txn)) s" | tr '|' ' ')
        cpu_us=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$n" 'BEGIN { printf "%.1f", (n > 0 ? (b - a) / 1000 / n : 0) }')
        printf '   %-5s %2s clients %6s/s (reached %7.0f/s): %-8s p50 %7s ms  p99 %7s ms  max %7s ms  relay CPU %6s us/event (%d events)\n' \
          "$sink" "$clients" "$rate" "${tps:-0}" "$gather" "$p50" "$p99" "$pmax" "$cpu_us" "$n"
        echo "$sink $clients $rate $gather ${tps:-0} $p50 $p99 $cpu_us $n" >>"$results"
      done
    done
  done
done

echo
echo "-- summary: adaptive (the default) against a batch per wake-up, same rate and clients"
awk '{ k = $1 " " $2 " " $3; if ($4 == "adaptive") { a50[k] = $6; a99[k] = $7; acpu[k] = $8; tps[k] = $5; order[++n] = k } else { cpu[k] = $8 } }
  END { for (i = 1; i <= n; i++) { k = order[i]; split(k, f, " ");
    printf "   %-5s %2s clients %6s/s: p50 %6s ms p99 %6s ms, relay CPU %5s us/event = %.2fx of a batch per wake-up\n",
      f[1], f[2], f[3], a50[k], a99[k], acpu[k], (cpu[k] > 0 ? acpu[k] / cpu[k] : 0) } }' "$results"
echo
ok=1
while read -r sink clients rate gather tps p50 p99 _ _; do
  [ "$gather" = adaptive ] && [ "$rate" -le 2000 ] || continue
  awk -v a="$p50" -v b="$p99" 'BEGIN { exit !(a <= 2 && b <= 10) }' || ok=0
done <"$results"
verdict "p50 <= 2 ms and p99 <= 10 ms up to 2,000 commits/s, adaptive, every sink and client count" "$ok"
