#!/usr/bin/env bash
# Issue #24 asked that each relay worker read only its own shards' events. This measures the
# two ways of doing it against what the relay does (docs/design.md, "Why every worker reads
# every shard"), on one backlog in one run:
#   scan         the relay's read: the next W x 1000 events by seq (index _queue, the
#                relay's columns), keeping the worker's shards' (shard_of() in SQL here;
#                the relay hashes in C, which is cheaper: this favours the others)
#   own_seqs     the worker's next ~1000 events fetched by seq = ANY(list), as a
#                shared-memory note of each seq's shard would allow (the lists are made
#                beforehand, one per starting point: the note's own cost is not counted)
#   shard_index  an index on (shard_of(aggregatetype, aggregateid), seq) on every partition:
#                per owned shard a scan of it, merged by seq (UNION ALL ... ORDER BY seq
#                LIMIT 1000: a MergeAppend), as the access path per shard would read (its
#                bound a row comparison, which only that index can use: by seq alone the
#                planner took the _queue index for some shards, filtering 3/4 of the rows)
# Every variant bounds part_at as the relay does (the premade future partitions are pruned),
# for W = 2 workers (each owns 32 of the 64 shards) and W = 4 (16). Each read starts at a
# random point of the backlog. One pgbench run per W (-M prepared, 1 client, SECONDS s)
# picks a variant at random for every read, so all meet the same cache at the same moments;
# ROUNDS runs, the median latency per read and the per-round ratios.
# Then the write side: WAL bytes per enqueue (one event per transaction, 2 clients, N
# events) without and with the per-shard index, alternating, after a CHECKPOINT each.
#
#   bash bench/relay/shard_read.sh          # ~2 min
#   QUICK=1 bash bench/relay/shard_read.sh  # ~1 min
# ROWS (200,000), SECONDS_PER_RUN (10; QUICK 4), ROUNDS (3; QUICK 2), N (20,000) override.
set -euo pipefail
# shellcheck source=bench/relay/lib.sh
. "$(dirname "$0")/lib.sh"

ROWS=${ROWS:-200000}
N=${N:-20000}
if [ "$QUICK" = 1 ]; then
  SECONDS_PER_RUN=${SECONDS_PER_RUN:-4}
  ROUNDS=${ROUNDS:-2}
else
  SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
  ROUNDS=${ROUNDS:-3}
fi

relay_header "Per-shard reads: the relay's scan against a shard index and a list of seqs"
relay_start 56318
sql -q -o /dev/null -c "SELECT outbox.unconfigure_sink()"   # the relay sends nothing
echo "   backlog: $ROWS events over 1000 keys; reads of ~1000 events of one worker's shards"
sql -q -o /dev/null -c "SELECT count(outbox.enqueue('order', 'k' || (g % 1000), 'OrderPlaced',
  '{\"order_id\": 123456, \"total\": 44.98, \"currency\": \"EUR\"}')) FROM generate_series(1, $ROWS) g"
shard_index_sql="DO \$\$ DECLARE p text; BEGIN
  FOR p IN SELECT name FROM outbox.partitions LOOP
    EXECUTE format('CREATE INDEX %I ON outbox.%I (outbox.shard_of(aggregatetype, aggregateid), seq)
                    WITH (fillfactor = 100)', p || '_shard', p);
  END LOOP; END \$\$"
drop_shard_index_sql="DO \$\$ DECLARE p text; BEGIN
  FOR p IN SELECT name FROM outbox.partitions LOOP
    EXECUTE format('DROP INDEX IF EXISTS outbox.%I', p || '_shard');
  END LOOP; END \$\$"
sql -q -c "$shard_index_sql"
sql -q -c "VACUUM ANALYZE outbox.events"
lo=$(sqlv "SELECT min(seq) FROM outbox.events")
hi=$(sqlv "SELECT max(seq) - 5000 FROM outbox.events")
columns="tableoid, ctid, id, aggregatetype::text, aggregateid::text, type::text, payload, headers, attempts, created_at, seq, xmin"

for W in 2 4; do
  : >"$BENCH_WORK/results.$W"
  # The starting points, and for own_seqs the worker's seqs among the next W x 1000 from each.
  sql -q -c "SET client_min_messages = warning; DROP TABLE IF EXISTS own_lists; CREATE TABLE own_lists AS
    SELECT i, (SELECT array_agg(seq ORDER BY seq) FROM (SELECT seq, aggregatetype, aggregateid
                 FROM outbox.events WHERE seq >= f ORDER BY seq LIMIT $W * 1000) s
                WHERE outbox.shard_of(aggregatetype, aggregateid) % $W = 0) AS seqs, f
      FROM (SELECT i, $lo + (i * 7919) % ($hi - $lo) AS f FROM generate_series(1, 200) i) p;
    ALTER TABLE own_lists ADD PRIMARY KEY (i); ANALYZE own_lists"
  bench_file "scan_$W.sql" >/dev/null <<EOF
\\set i random(1, 200)
SELECT count(*) FROM (SELECT $columns FROM outbox.events
  WHERE seq >= (SELECT f FROM own_lists WHERE i = :i) AND part_at < now() + interval '1 minute'
  ORDER BY seq LIMIT $W * 1000) s
 WHERE outbox.shard_of(aggregatetype, aggregateid) % $W = 0;
EOF
  bench_file "own_seqs_$W.sql" >/dev/null <<EOF
\\set i random(1, 200)
SELECT count(*) FROM (SELECT $columns FROM outbox.events
  WHERE seq = ANY ((SELECT seqs FROM own_lists WHERE i = :i)::int8[])
    AND part_at < now() + interval '1 minute' ORDER BY seq) s;
EOF
  union=""
  for s in $(seq 0 "$W" 63); do
    [ -z "$union" ] || union="$union UNION ALL "
    union="$union(SELECT $columns FROM outbox.events
      WHERE outbox.shard_of(aggregatetype, aggregateid) = $s
        AND (outbox.shard_of(aggregatetype, aggregateid), seq) >= ($s, (SELECT f FROM own_lists WHERE i = :i))
        AND part_at < now() + interval '1 minute'
      ORDER BY outbox.shard_of(aggregatetype, aggregateid), seq LIMIT 1000)"
  done
  bench_file "shard_index_$W.sql" >/dev/null <<EOF
\\set i random(1, 200)
SELECT count(*) FROM (SELECT * FROM ($union) u ORDER BY seq LIMIT 1000) s;
EOF
  plan=$(sqlv "EXPLAIN (COSTS OFF) $(tail -n +2 "$BENCH_WORK/shard_index_$W.sql" | sed 's/:i/1/g')")
  echo "   $W workers: shard_index's plan scans the shard index $(grep -c '_shard on' <<<"$plan") times," \
       "_queue $(grep -c '_queue on' <<<"$plan") times"
  for r in $(seq 1 "$ROUNDS"); do
    bench_mix "$BENCH_WORK/results.$W" 1 "$r" "$SECONDS_PER_RUN" "scan_$W" "own_seqs_$W" "shard_index_$W"
  done
done

echo
echo "   reads: latency per read of one worker's ~1000 events (ms, median of $ROUNDS runs)"
echo "   | workers | scan | own_seqs | shard_index | own_seqs / scan | shard_index / scan |"
echo "   | ---: | ---: | ---: | ---: | ---: | ---: |"
for W in 2 4; do
  results="$BENCH_WORK/results.$W"
  med() { awk -v v="$1_$W" '$3 == v { print $4 }' "$results" | median; }
  per_round() {
    awk -v a="$1_$W" -v b="scan_$W" '$3 == a { x[$2] = $4 } $3 == b { y[$2] = $4 }
      END { for (r in x) printf "%.2f\n", x[r] / y[r] }' "$results" | median
  }
  echo "   | $W | $(med scan) | $(med own_seqs) | $(med shard_index) | $(per_round own_seqs)x | $(per_round shard_index)x |"
done

# The write side: WAL per enqueue without and with the per-shard index.
bench_file enqueue.sql >/dev/null <<'EOF'
\set k random(1, 1000)
SELECT outbox.enqueue('order', :k::text, 'OrderPlaced', '{"order_id": 123456, "total": 44.98, "currency": "EUR"}');
EOF
wal_per_event() {
  local a b
  sql -q -c "CHECKPOINT"
  a=$(sqlv "SELECT pg_current_wal_insert_lsn()")
  pgb -n -M prepared -c 2 -j 2 -t $((N / 2)) -f "$BENCH_WORK/enqueue.sql" >/dev/null
  b=$(sqlv "SELECT pg_current_wal_insert_lsn()")
  sqlv "SELECT round(pg_wal_lsn_diff('$b', '$a') / $N)"
}
plain=()
indexed=()
for r in $(seq 1 "$ROUNDS"); do
  sql -q -c "$drop_shard_index_sql"
  plain+=("$(wal_per_event)")
  sql -q -c "$shard_index_sql"
  indexed+=("$(wal_per_event)")
done
wal_plain=$(printf '%s\n' "${plain[@]}" | median)
wal_indexed=$(printf '%s\n' "${indexed[@]}" | median)
echo
echo "   writes: WAL bytes per enqueue ($N events per run, one per transaction, median of $ROUNDS)"
echo "   | | bytes | x 0.5.0's enqueue + delivery (655) |"
echo "   | --- | ---: | ---: |"
echo "   | enqueue (no shard index) | $wal_plain | $(ratio "$wal_plain" 655)x |"
echo "   | enqueue with the shard index | $wal_indexed | $(ratio "$wal_indexed" 655)x |"
echo
echo "   runs: plain ${plain[*]}; with the index ${indexed[*]}"
