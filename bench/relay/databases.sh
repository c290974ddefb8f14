#!/usr/bin/env bash
# Relays in several databases: the launcher starts outbox.workers relays (1) in every
# database that has the extension, within outbox.max_workers for the whole cluster.
#
# One cluster, outbox.max_workers = 20 and max_worker_processes = 24 (20 relays and the
# launcher), every other setting at its default (outbox.workers 1 per database,
# outbox.poll_interval 1 s, woken at commit), null sink in each database.
#
# 1. Idle databases. The database postgres alone, then IDLE_DBS (20) databases (postgres and
#    db02..db20), each with CREATE EXTENSION outbox and configure_sink('null') and nothing
#    enqueued. Once every relay shows state idle in outbox.cluster_status (and SETTLE_S, 5 s,
#    more), over IDLE_S seconds (60; QUICK=1: 15) with no session connected: the CPU time of
#    every relay process and of the launcher (all threads, /proc/PID/task/*/schedstat, ns),
#    in % of one core; and the relays' memory at the end of the window from
#    /proc/PID/smaps_rollup: Pss (each page divided among the processes that map it, so the
#    shared buffers a relay touched count only in part; Pss_Shmem is that part), Rss (each
#    mapped page in full, shared buffers and the postgres binary included) and private pages;
#    and how often the relays were put on a CPU (schedstat's third field: their wake-ups),
#    so the CPU per wake-up.
#    Target: the 20 databases' relays and the launcher under 1 % of one core.
# 2. Writers in WRITER_DBS (5) databases against one. pgbench -R (Poisson arrivals), one
#    outbox.enqueue() per autocommit transaction, per run either
#      five  RATE (200) commits/s in EACH of postgres, db02..db05, CLIENTS (2) clients each,
#            the 5 pgbench runs at once
#      one   RATE x 5 (1,000) commits/s in postgres alone, CLIENTS x 5 (10) clients, -j 2
#      alone RATE (200) commits/s in postgres alone, CLIENTS (2) clients: a control, the rate
#            of one of the five databases without the other four (no target)
#    SECONDS_PER_RUN (20; QUICK=1: 5) each, in ROUNDS rounds (3; QUICK=1: 1; the order is
#    reversed every other round). The other 15 databases' relays stay up and idle throughout.
#    Latency as latency_curve.sh measures it: from the moment COMMIT returned to pgbench (its
#    per-transaction log, -l) to the event's published_at in outbox.event_status (the
#    relay's clock after the sink's acknowledgement, from outbox.deliveries), same clock; a
#    client's k-th event (by seq) is its k-th transaction. p50 / p99 per database and run;
#    reported: their medians over the rounds, and for each of the five databases the median
#    of its per-round ratios to the same round's one-database run (min-max). Target: each
#    within 1.2x. The same ratios to the control beside them. Also the relays' CPU (all of
#    them) from the writers' start until the last event is published, in % of one core.
#
#   bash bench/relay/databases.sh          # ~7 min
#   QUICK=1 bash bench/relay/databases.sh  # ~1.2 min
# IDLE_DBS, IDLE_S, SETTLE_S, WRITER_DBS, RATE, CLIENTS, ROUNDS, SECONDS_PER_RUN override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  IDLE_S=${IDLE_S:-15}; ROUNDS=${ROUNDS:-1}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
else
  IDLE_S=${IDLE_S:-60}; ROUNDS=${ROUNDS:-3}; SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
fi
IDLE_DBS=${IDLE_DBS:-20}
SETTLE_S=${SETTLE_S:-5}
WRITER_DBS=${WRITER_DBS:-5}
RATE=${RATE:-200}
CLIENTS=${CLIENTS:-2}

DBS=(postgres)
for i in $(seq 2 "$IDLE_DBS"); do DBS+=("$(printf 'db%02d' "$i")"); done
WDBS=("${DBS[@]:0:$WRITER_DBS}")

relay_header "relays in several databases: $IDLE_DBS idle databases, writers in $WRITER_DBS databases against 1" \
  "1 worker per database (outbox.workers = 1, started by the launcher), outbox.max_workers = $IDLE_DBS,"
# outbox.database = '' undoes relay_start's restriction to the database postgres.
relay_start 56319 "outbox.database = ''" "outbox.max_workers = $IDLE_DBS" \
  "max_worker_processes = $((IDLE_DBS + 4))"
if [ "$(sqlv "SELECT count(*) FROM pg_proc WHERE proname = '_cluster_workers'")" = 0 ]; then
  echo "the installed outbox has no outbox.cluster_status (a build before the launcher?)" >&2
  exit 1
fi
echo "   idle windows of $IDLE_S s (after $SETTLE_S s); writers: $ROUNDS round(s) of $SECONDS_PER_RUN s per variant"
results="$BENCH_WORK/results.txt"
: >"$results"

# db_setup DB: the extension (but in postgres, which relay_start gave it) and the null sink.
db_setup() {
  if [ "$1" != postgres ]; then
    as_postgres createdb -h "$BENCH_WORK" -p "$BENCH_PORT" "$1"
    BENCH_DB=$1 sql -c "CREATE EXTENSION outbox"
  fi
  BENCH_DB=$1 sqlv "SELECT outbox.configure_sink('null')" >/dev/null
}

# relay_pids: the pids of every database's relays (outbox.cluster_status), by database.
relay_pids() {
  sqlv "SELECT string_agg(pid::text, ' ' ORDER BY database, worker) FROM outbox.cluster_status WHERE pid > 0"
}

# wait_idle N: until N relays show state idle in outbox.cluster_status, and pg_stat_activity
# shows as many 'outbox relay' backends (60 s at most; then the rows, and a WARNING).
wait_idle() {
  local got=""
  for _ in $(seq 600); do
    got=$(sqlv "SELECT (SELECT count(*) FROM outbox.cluster_status WHERE state = 'idle') || ' '
                       || (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'outbox relay')")
    [ "$got" = "$1 $1" ] && return 0
    sleep 0.1
  done
  echo "   WARNING: $1 idle relays expected, found (idle, relay backends) $got:"
  sql -c "SELECT database, worker, pid, state, detail, last_error FROM outbox.cluster_status" | sed 's/^/      /'
}

# sched PID...: "NS RUNS": CPU time so far of these processes, all their threads, in ns, and
# how many times they were put on a CPU (/proc/PID/task/*/schedstat, fields 1 and 3).
sched() {
  local pid
  for pid in "$@"; do cat /proc/"$pid"/task/*/schedstat 2>/dev/null; done |
    awk '{ s += $1; r += $3 } END { printf "%.0f %.0f\n", s, r }'
}

# smaps_mb PID...: Pss Pss_Shmem Rss private (Private_Clean + Private_Dirty), in MB, summed
# over these processes' /proc/PID/smaps_rollup.
smaps_mb() {
  local pid
  for pid in "$@"; do cat /proc/"$pid"/smaps_rollup; done |
    awk '{ v[$1] += $2 } END { printf "%.1f %.1f %.1f %.1f", v["Pss:"] / 1024, v["Pss_Shmem:"] / 1024,
                                   v["Rss:"] / 1024, (v["Private_Clean:"] + v["Private_Dirty:"]) / 1024 }'
}

# idle_window LABEL N: N relays idle, then IDLE_S seconds with no session; appends to results
# "idle LABEL N relay_pct launcher_pct pss pss_shmem rss private launcher_pss runs_per_s".
idle_window() {
  local pids launcher t0 c0 r0 l0 t1 c1 r1 l1 after
  wait_idle "$2"
  sleep "$SETTLE_S"
  pids=$(relay_pids)
  launcher=$(sqlv "SELECT pid FROM pg_stat_activity WHERE backend_type = 'outbox launcher'")
  # shellcheck disable=SC2086
  { t0=$(now_us); read -r c0 r0 < <(sched $pids); read -r l0 _ < <(sched $launcher); }
  sleep "$IDLE_S"
  # shellcheck disable=SC2086
  { t1=$(now_us); read -r c1 r1 < <(sched $pids); read -r l1 _ < <(sched $launcher); }
  after=$(relay_pids)
  [ "$after" = "$pids" ] || echo "   WARNING: the relays changed during the window ($pids -> $after)"
  # shellcheck disable=SC2086
  echo "idle $1 $(wc -w <<<"$pids") $(awk -v c="$((c1 - c0))" -v l="$((l1 - l0))" -v t="$((t1 - t0))" \
    'BEGIN { printf "%.3f %.3f", c / 10 / t, l / 10 / t }') $(smaps_mb $pids) $(smaps_mb $launcher | cut -d' ' -f1)" \
    "$(awk -v r="$((r1 - r0))" -v t="$((t1 - t0))" 'BEGIN { printf "%.2f", r * 1e6 / t }')" |
    tee -a "$results" | awk '{ printf "   %-12s %2d relays: relays %.3f %% of a core, launcher %.3f %%; relays Pss %s MB, Rss %s MB\n", $2, $3, $4, $5, $6, $8 }'
}

echo
echo "-- 1. idle relays, null sink, nothing enqueued, outbox.poll_interval $(sqlv "SHOW outbox.poll_interval")"
db_setup postgres
idle_window "1-database" 1
for db in "${DBS[@]:1}"; do db_setup "$db"; done
idle_window "$IDLE_DBS-databases" "$IDLE_DBS"

echo
echo "-- 2. writers: $RATE commits/s in each of ${WDBS[*]} at once (five), against $((RATE * WRITER_DBS)) commits/s in postgres"
echo "   alone (one); control: $RATE commits/s in postgres alone (alone)"
# lat: every event's latency; per_round: each run's p50 / p99 per database of the five,
# beside the same round's one-database runs (base: one, alone).
sql -q <<'EOF'
CREATE TABLE lat (run int, variant text, round int, db text, ms float8);
CREATE FUNCTION med(float8[]) RETURNS numeric LANGUAGE sql AS
  'SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric FROM unnest($1) x';
CREATE AGGREGATE med(float8) (sfunc = array_append, stype = float8[], finalfunc = med, initcond = '{}');
CREATE VIEW pct AS
  SELECT variant, round, db, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
         percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
    FROM lat GROUP BY variant, round, db;
CREATE VIEW per_round AS
  SELECT o.variant AS base, f.db, f.round, f.p50, f.p99, o.p50 AS base_p50, o.p99 AS base_p99,
         f.p50 / o.p50 AS r50, f.p99 / o.p99 AS r99
    FROM pct f JOIN pct o ON o.round = f.round AND o.variant <> 'five'
   WHERE f.variant = 'five';
EOF
for db in "${WDBS[@]}"; do
  # commit_to_published(RUN): per event of run RUN, ms from the moment COMMIT returned to
  # pgbench (pgbench_log, its -l log) to published_at.
  BENCH_DB=$db sql -q <<'EOF'
CREATE TABLE pgbench_log (client int, txn int, latency_us bigint, script int, epoch bigint, us int, lag_us bigint);
CREATE FUNCTION commit_to_published(run text) RETURNS SETOF float8 LANGUAGE sql AS $$
  SELECT 1000 * (extract(epoch FROM e.published_at) - l.epoch - l.us / 1e6)::float8
    FROM pgbench_log l
    JOIN (SELECT aggregateid::int AS client, published_at,
                 row_number() OVER (PARTITION BY aggregateid ORDER BY seq) AS txn
            FROM outbox.event_status WHERE aggregatetype = run) e USING (client, txn)
$$;
EOF
done
bench_file enqueue.sql >/dev/null <<'EOF'
SELECT outbox.enqueue('run' || :run, :client_id::text, 'T', '{"n": 1}');
EOF

# writers VARIANT ROUND: one run of the variant (five | one | alone); appends per database
# "run VARIANT ROUND DB asked_rate tps" to results, and its latencies to lat.
run=0
writers() {
  local variant=$1 round=$2 dbs rate clients threads db pids=() pid relays0 relays1 c0 c1 t0 t1 tps n p50 p99
  run=$((run + 1))
  if [ "$variant" = five ]; then
    dbs=("${WDBS[@]}"); rate=$RATE; clients=$CLIENTS; threads=1
  elif [ "$variant" = one ]; then
    dbs=(postgres); rate=$((RATE * WRITER_DBS)); clients=$((CLIENTS * WRITER_DBS)); threads=2
  else
    dbs=(postgres); rate=$RATE; clients=$CLIENTS; threads=1
  fi
  relays0=$(relay_pids)
  # shellcheck disable=SC2086
  { t0=$(now_us); read -r c0 _ < <(sched $relays0); }
  rm -f "$BENCH_WORK"/pgl.*
  for db in "${dbs[@]}"; do
    BENCH_DB=$db pgb -n -c "$clients" -j "$threads" -R "$rate" -T "$SECONDS_PER_RUN" -D run="$run" \
      -l --log-prefix="$BENCH_WORK/pgl.$db" -f "$BENCH_WORK/enqueue.sql" >"$BENCH_WORK/pgbench.$db.out" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  for db in "${dbs[@]}"; do BENCH_DB=$db relay_wait_published 60; done
  # shellcheck disable=SC2086
  { t1=$(now_us); read -r c1 _ < <(sched $relays0); }
  relays1=$(relay_pids)
  [ "$relays1" = "$relays0" ] || echo "   WARNING: the relays changed during run $run ($relays0 -> $relays1)"
  for db in "${dbs[@]}"; do
    BENCH_DB=$db sql -q -c "TRUNCATE pgbench_log"
    cat "$BENCH_WORK"/pgl."$db".* | BENCH_DB=$db sql -q -c "\\copy pgbench_log FROM pstdin (FORMAT text, DELIMITER ' ')"
    BENCH_DB=$db sql -q -c "\\copy (SELECT $run, '$variant', $round, '$db', ms FROM commit_to_published('run$run') ms) TO pstdout" |
      sql -q -c "\\copy lat FROM pstdin"
    tps=$(pgbench_tps "$BENCH_WORK/pgbench.$db.out")
    echo "run $variant $round $db $rate ${tps:-0}" >>"$results"
    read -r n p50 p99 < <(sqlv "SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
                                       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2)
                                  FROM lat WHERE run = $run AND db = '$db'" | tr '|' ' ')
    printf '   round %d %-5s %-8s %5s/s asked, reached %7.1f/s: p50 %6s ms  p99 %6s ms  (%d events)\n' \
      "$round" "$variant" "$db" "$rate" "${tps:-0}" "$p50" "$p99" "$n"
  done
  # The relays' CPU from the writers' start until the last event was published.
  echo "cpu $variant $round $(awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" 'BEGIN { printf "%.2f", c / 10 / t }')" >>"$results"
}

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order="one five alone"; else order="alone five one"; fi
  for variant in $order; do writers "$variant" "$round"; done
done

echo
echo "-- summary: idle relays (CPU over $IDLE_S s, memory at its end; Pss divides each shared page, shared"
echo "   buffers included, among the processes that map it; Rss counts it in full in each)"
awk '$1 == "idle" { n++; for (i = 2; i <= 12; i++) v[n, i] = $i }
  END {
    printf "   %-40s %14s %14s\n", "", v[1, 2], v[2, 2]
    row("relays", 3, "%14d", 1)
    row("relays CPU, % of one core", 4, "%14.3f", 1)
    row("  per relay", 4, "%14.4f", 3)
    row("  times on a CPU, per relay per second", 11, "%14.2f", 3)
    printf "   %-40s %14.0f %14.0f\n", "  CPU per time on a CPU, us", v[1, 4] * 1e4 / v[1, 11], v[2, 4] * 1e4 / v[2, 11]
    row("launcher CPU, % of one core", 5, "%14.3f", 1)
    printf "   %-40s %14.3f %14.3f\n", "relays + launcher, % of one core", v[1, 4] + v[1, 5], v[2, 4] + v[2, 5]
    row("relays Pss, MB", 6, "%14.1f", 1)
    row("  per relay", 6, "%14.1f", 3)
    row("  of which shared memory (Pss_Shmem), MB", 7, "%14.1f", 1)
    row("relays Rss, MB (shared pages in full)", 8, "%14.1f", 1)
    row("relays private pages, MB", 9, "%14.1f", 1)
    row("  per relay", 9, "%14.1f", 3)
    row("launcher Pss, MB", 10, "%14.1f", 1)
  }
  function row(label, i, fmt, per) {
    printf "   %-40s " fmt " " fmt "\n", label, v[1, i] / (per == 3 ? v[1, 3] : 1), v[2, i] / (per == 3 ? v[2, 3] : 1)
  }' "$results"
idle_pct=$(awk -v n="$IDLE_DBS" '$1 == "idle" && $3 == n { printf "%.3f", $4 + $5 }' "$results")

echo
echo "-- summary: commit -> published, ms, per database: medians of the $ROUNDS round(s); ratio: median of the"
echo "   per-round ratios of each of the $WRITER_DBS databases to the same round's one-database run (min-max)"
sql -P footer=off -c "
  SELECT CASE base WHEN 'one' THEN '$((RATE * WRITER_DBS))/s in 1 db' ELSE 'control: $RATE/s in 1 db' END AS against,
         db AS database, round(med(p50), 2) AS p50, round(med(p99), 2) AS p99,
         round(med(base_p50), 2) AS \"1 db: p50\", round(med(base_p99), 2) AS \"1 db: p99\",
         round(med(r50), 2) || ' (' || round(min(r50)::numeric, 2) || '-' || round(max(r50)::numeric, 2) || ')' AS \"p50 ratio\",
         round(med(r99), 2) || ' (' || round(min(r99)::numeric, 2) || '-' || round(max(r99)::numeric, 2) || ')' AS \"p99 ratio\"
    FROM per_round GROUP BY base, db ORDER BY base DESC, db" | sed -e '/^$/d' -e 's/^/   /'
echo "   relays' CPU (all $IDLE_DBS relays, writers' start to the last publication, median of the rounds):" \
  "$(for v in five one alone; do
       echo "$v $(awk -v v="$v" '$1 == "cpu" && $2 == v { print $4 }' "$results" | median) %"
     done | paste -sd, | sed 's/,/, /g') of one core"
worst=$(sqlv "SELECT round(max(greatest(r50, r99)), 2)
                FROM (SELECT med(r50) AS r50, med(r99) AS r99 FROM per_round WHERE base = 'one' GROUP BY db) m")
echo
echo "   server log: $(grep -cE '(ERROR|FATAL|PANIC|WARNING):' "$BENCH_WORK/server.log" || true) ERROR/FATAL/PANIC/WARNING lines"
grep -E '(ERROR|FATAL|PANIC|WARNING):' "$BENCH_WORK/server.log" | head -n 10 | sed 's/^/      /' || true
echo
verdict "$IDLE_DBS idle databases: relays + launcher under 1 % of one core ($idle_pct %)" \
  "$(awk -v p="$idle_pct" 'BEGIN { print (p != "" && p < 1) ? 1 : 0 }')"
verdict "$WRITER_DBS databases at $RATE commits/s each: every database's p50 and p99 within 1.2x of 1 database at $((RATE * WRITER_DBS)) commits/s (worst ${worst}x)" \
  "$(awk -v w="$worst" 'BEGIN { print (w != "" && w <= 1.2) ? 1 : 0 }')"
