#!/usr/bin/env bash
# Writer throughput with the relay's wake-up at commit on and off, and with a
# NOTIFY-per-commit trigger instead (issue #3; target: at most 3 % loss at 32 writers; the
# article's peer measured the NOTIFY trigger at -40 % with 8 writers and -55 % with 32).
#
# pgbench (-M prepared), 1 / 8 / 32 clients (-j 1 / 2 / 2), each transaction:
#   BEGIN; INSERT an order RETURNING id; SELECT outbox.enqueue('order', id, 'OrderPlaced',
#   ~170-byte JSON); COMMIT
# Variants (the relay runs with the null sink in all three, publishing what is written):
#   wake on   outbox.wake_at_commit = on (default): each committing writer sets the relay's
#             latch
#   wake off  PGOPTIONS='-c outbox.wake_at_commit=off': the relay finds the events by its
#             poll (outbox.poll_interval, 1 s by default)
#   notify    wake off, and the order table has an AFTER INSERT trigger that runs
#             pg_notify('outbox_events', id) (the hand-made alternative to the latch); a
#             session LISTENs and consumes the notifications, as a relay woken by NOTIFY
#             would
# Interleaved rounds; median tps; loss = 1 - the median of the per-round ratios against
# "wake off". Alongside: the relay's CPU (utime + stime of its process) and its batches per
# second in each run, and the spread of the ratios (quartiles).
#
# The order of the variants is balanced for carry-over: round r runs rotation r of the
# variant list, and every second cycle of rotations runs them mirrored, so that over each
# 2 x (number of variants) rounds every variant follows every other one equally often. (A
# plain rotation had "wake on" follow the NOTIFY run, whose listener is still draining its
# notifications, twice as often as "wake off" did.) Each run starts after a pause of
# SETTLE_S seconds (1) in which the relay drains what the last run left.
#
# The machine is noisy: two identical variants differ by up to 10 % in one round. AA=1
# runs a control instead: the "wake on" slot runs with the wake-up off too, so its "loss"
# is the benchmark's own error for the same number of rounds.
# Whole runs still drift by several per cent: for the target at 32 writers,
# writers_alternating.sh switches the wake-up every 4 s inside one long run instead.
#
#   bash bench/relay/writers.sh          # 12 rounds x 5 s per variant and client count, ~12 min
#   QUICK=1 bash bench/relay/writers.sh  # 6 rounds x 2 s, ~2.5 min
# ROUNDS, SECONDS_PER_RUN, SETTLE_S, CLIENTS override. GATHER_MS="20 100" adds a "wake on"
# variant per value, run with outbox.min_batch_interval set to it (ALTER SYSTEM and a reload
# before each of its runs), interleaved with the others.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-6}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
else
  ROUNDS=${ROUNDS:-12}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
fi
CLIENTS=${CLIENTS:-"1 8 32"}
SETTLE_S=${SETTLE_S:-1}
AA=${AA:-0}

relay_header "writers: pgbench throughput with the relay's wake-up at commit on / off / NOTIFY trigger"
relay_start 56303 "${RELAY_SETTINGS:-}"
echo "   rounds=$ROUNDS, $SECONDS_PER_RUN s per run after ${SETTLE_S} s of settling, clients: $CLIENTS"
[ "$AA" = 1 ] && echo "   AA=1: control run, the 'wake on' slot runs with the wake-up off"

sqlv "SELECT outbox.configure_sink('null')" >/dev/null
orders_table_sql | sql -o /dev/null
sql -o /dev/null <<'SQL'
CREATE TABLE orders_notify (LIKE orders INCLUDING ALL);
CREATE SEQUENCE orders_notify_id_seq OWNED BY orders_notify.id;
ALTER TABLE orders_notify ALTER COLUMN id SET DEFAULT nextval('orders_notify_id_seq');
CREATE FUNCTION notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_events', NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER orders_notify_event AFTER INSERT ON orders_notify
    FOR EACH ROW EXECUTE FUNCTION notify_outbox();
SQL

writer_txn_sql orders | bench_file plain.sql >/dev/null
writer_txn_sql orders_notify | bench_file notify.sql >/dev/null

# The LISTENing session (stopped at exit).
"$PY" "$RELAY_BENCH_DIR/relaybench.py" listen --channel outbox_events &
RELAY_EXTRA_PIDS="$RELAY_EXTRA_PIDS $!"

VARIANTS="on off notify"
declare -A FILE=([on]=plain [off]=plain [notify]=notify)
declare -A OPTS=([on]="" [off]="-c outbox.wake_at_commit=off" [notify]="-c outbox.wake_at_commit=off")
declare -A LABEL=([on]="wake at commit on (default)" [off]="wake at commit off (poll 1 s)"
                  [notify]="wake off + NOTIFY-per-commit trigger")
if [ "$AA" = 1 ]; then
  OPTS[on]=${OPTS[off]}
  LABEL[on]="control: wake off again"
fi
declare -A INTERVAL_MS=()
for ms in ${GATHER_MS:-}; do
  VARIANTS="$VARIANTS on$ms"
  FILE[on$ms]=plain
  OPTS[on$ms]=""
  LABEL[on$ms]="wake on, min_batch_interval ${ms} ms"
  INTERVAL_MS[on$ms]=$ms
done
# The relay's outbox.min_batch_interval for variant $1: its own, or the cluster's setting.
set_interval() {
  if [ -n "${INTERVAL_MS[$1]:-}" ]; then
    sql -o /dev/null -c "ALTER SYSTEM SET outbox.min_batch_interval = '${INTERVAL_MS[$1]}ms'" -c "SELECT pg_reload_conf()"
  else
    sql -o /dev/null -c "ALTER SYSTEM RESET outbox.min_batch_interval" -c "SELECT pg_reload_conf()"
  fi
  sleep 0.2  # the relay rereads its settings at its next pass
}

relay_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$RELAY_PID/stat"; }
relay_batches() { sqlv "SELECT batches FROM outbox._workers()"; }
TICKS=$(getconf CLK_TCK)

results="$BENCH_WORK/results.txt"   # clients round variant tps relay_cpu_pct batches_per_s
: >"$results"
for v in on notify; do  # warm-up
  as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c 2 -T 1 -f "$BENCH_WORK/${FILE[$v]}.sql" "$BENCH_DB" >/dev/null 2>&1
done
# The relay's UPDATE of a partition is a plan prepared once and kept (SPI_keepplan): made
# while the partition was still nearly empty and never analyzed, it is a Seq Scan with
# "Filter: ctid = ANY($2)", which then reads the whole partition for every batch, until an
# ANALYZE of the partition invalidates it (autovacuum's, within a minute or so, in service).
# So that every variant is measured in that later state, not in the first minute of a
# fresh partition, write some events and ANALYZE before the first measured run.
as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared -c 4 -j 2 -t 2500 -f "$BENCH_WORK/plain.sql" "$BENCH_DB" >/dev/null 2>&1
sql -c "ANALYZE outbox.events"
read -r -a vlist <<<"$VARIANTS"
n=${#vlist[@]}
for c in $CLIENTS; do
  j=$((c < 2 ? c : 2))
  for r in $(seq 1 "$ROUNDS"); do
    printf '   clients=%s round %s/%s:' "$c" "$r" "$ROUNDS"
    for k in $(seq 0 $((n - 1))); do
      # Rotation r - 1; mirrored in every second cycle of n rounds.
      if [ $((((r - 1) / n) % 2)) = 1 ]; then pos=$((n - 1 - k)); else pos=$k; fi
      v=${vlist[$(((pos + r - 1) % n))]}
      out="$BENCH_WORK/out.$v.$c.$r"
      [ -z "${GATHER_MS:-}" ] || set_interval "$v"
      sleep "$SETTLE_S"
      t0=$(relay_cpu_ticks); b0=$(relay_batches)
      if ! as_postgres env PGOPTIONS="${OPTS[$v]}" pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M prepared \
           -c "$c" -j "$j" -T "$SECONDS_PER_RUN" -f "$BENCH_WORK/${FILE[$v]}.sql" "$BENCH_DB" >"$out" 2>&1; then
        cat "$out"; exit 1
      fi
      t1=$(relay_cpu_ticks); b1=$(relay_batches)
      tps=$(pgbench_tps "$out")
      cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$TICKS" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }')
      bps=$(awk -v a="$b0" -v b="$b1" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.0f", (b - a) / s }')
      echo "$c $r $v $tps $cpu $bps" >>"$results"
      printf ' %s=%.0f' "$v" "$tps"
    done
    echo
  done
done
# The last run may have had the wake-up off: give the relay up to 10 s (its poll is 1 s).
for _ in $(seq 100); do
  left=$(sqlv "SELECT count(*) FROM outbox.event_status WHERE published_at IS NULL")
  [ "$left" = 0 ] && break
  sleep 0.1
done
total=$(sqlv "SELECT count(*) FROM outbox.events")
echo "   (events written: $total; unpublished after waiting up to 10 s: $left)"

vals() {  # CLIENTS VARIANT FIELD
  awk -v c="$1" -v v="$2" -v f="$3" '$1 == c && $3 == v { print $f }' "$results"
}
echo
echo "-- results: median tps over $ROUNDS rounds of ${SECONDS_PER_RUN}s; vs off = median of the per-round"
echo "   ratios to 'wake off' (q1 / q3: their quartiles); relay CPU = the relay process's CPU time / run"
echo "   time; batches/s = the relay's"
declare -A REL
for c in $CLIENTS; do
  echo
  echo "   clients=$c"
  printf '   %-40s %9s %9s %9s %9s %7s %7s %10s %10s\n' variant "tps(med)" min max "vs off" q1 q3 "relay CPU" "batches/s"
  for v in $VARIANTS; do
    med=$(vals "$c" "$v" 4 | median)
    min=$(vals "$c" "$v" 4 | sort -g | head -n 1)
    max=$(vals "$c" "$v" 4 | sort -g | tail -n 1)
    ratios=$(awk -v c="$c" -v v="$v" '$1 == c && $3 == v { t[$2] = $4 } $1 == c && $3 == "off" { s[$2] = $4 }
             END { for (r in t) if (r in s) print t[r] / s[r] }' "$results" | sort -g)
    rat=$(median <<<"$ratios")
    q1=$(awk '{ v[NR] = $1 } END { print v[int((NR + 3) / 4)] }' <<<"$ratios")
    q3=$(awk '{ v[NR] = $1 } END { print v[int((3 * NR + 3) / 4)] }' <<<"$ratios")
    REL[$c.$v]=$rat
    printf '   %-40s %9.0f %9.0f %9.0f %+8.1f%% %+6.1f%% %+6.1f%% %9.0f%% %10.0f\n' "${LABEL[$v]}" "$med" "$min" "$max" \
      "$(awk -v x="$rat" 'BEGIN { print 100 * (x - 1) }')" "$(awk -v x="$q1" 'BEGIN { print 100 * (x - 1) }')" \
      "$(awk -v x="$q3" 'BEGIN { print 100 * (x - 1) }')" "$(vals "$c" "$v" 5 | median)" "$(vals "$c" "$v" 6 | median)"
  done
done

echo
echo "-- targets"
for c in $CLIENTS; do
  x=${REL[$c.on]}
  loss=$(awk -v x="$x" 'BEGIN { printf "%.1f", 100 * (1 - x) }')
  if [ "$AA" = 1 ]; then
    echo "   clients=$c: control (wake off in both slots): 'loss' $loss % -- the benchmark's error"
  elif [ "$c" = 32 ]; then
    verdict "clients=32: wake at commit costs at most 3 % of writer throughput (measured loss $loss %)" \
      "$(awk -v x="$x" 'BEGIN { print (x >= 0.97) ? 1 : 0 }')"
  else
    echo "   clients=$c: wake at commit loss $loss % (no target)"
  fi
done
for c in $CLIENTS; do
  for ms in ${GATHER_MS:-}; do
    echo "   clients=$c: wake at commit with min_batch_interval $ms ms: loss" \
         "$(awk -v x="${REL[$c.on$ms]}" 'BEGIN { printf "%.1f", 100 * (1 - x) }') %"
  done
done
for c in $CLIENTS; do
  y=${REL[$c.notify]}
  echo "   clients=$c: NOTIFY-per-commit trigger vs wake off: $(awk -v x="$y" 'BEGIN { printf "%+.1f %%", 100 * (x - 1) }')" \
       "(article's peer: -40 % at 8, -55 % at 32)"
done
