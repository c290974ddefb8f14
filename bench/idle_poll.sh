#!/usr/bin/env bash
# The idle poll: what a relay pays to learn that there is no work, with a lot of published
# history kept in the table (the article's "table that grows" block).
#
# The same history (about 75 MB of published events, HISTORY_ROWS rows) is loaded into:
#   outbox/45p   outbox.events with 45 partitions: 40 hourly partitions of history made
#                with outbox._create_partition() for past hours, plus the 5 daily ones
#                that CREATE EXTENSION makes (database "bench")
#   outbox/5p    outbox.events as installed, 5 daily partitions, the history spread over
#                them (database "bench_few")
#   naive+idx    the article's bigserial table with its partial index
#   naive        the article's bigserial table with no fitting index (primary key only)
# History rows are written as already published. Then a burst of BURST_ROWS events goes
# through the real path (outbox.enqueue(), a plain INSERT for the naive tables), is marked
# published in one UPDATE and VACUUMed, as the article does: the partial indexes have held
# rows and been emptied, as they would be in service.
#
# Polls (autocommit, as a relay runs them):
#   SELECT seq FROM outbox.events WHERE seq >= <low-water mark> AND published_at IS NULL
#     AND dead_at IS NULL AND next_attempt_at IS NULL ORDER BY seq LIMIT 100 FOR UPDATE SKIP LOCKED
#   (the relay's query since 0.2.0; the mark is set where a relay that has caught up has it)
#   SELECT id FROM outbox_naive WHERE published_at IS NULL ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED
# timed with pgbench (-M simple: parsed and planned each time, as psql does; -M prepared:
# planned once, as psycopg does after 5 executions), one client, in interleaved rounds.
#
#   bash bench/idle_poll.sh          # full: 5 rounds x 1 s per variant and mode (~1.5 min)
#   QUICK=1 bash bench/idle_poll.sh  # about a minute, ~20 MB of history
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  HISTORY_ROWS=${HISTORY_ROWS:-60000}; BURST_ROWS=5000; ROUNDS=${ROUNDS:-3}; SECONDS_PER_RUN=1
else
  HISTORY_ROWS=${HISTORY_ROWS:-240000}; BURST_ROWS=20000; ROUNDS=${ROUNDS:-5}; SECONDS_PER_RUN=1
fi
HISTORY_PARTITIONS=40

bench_header "idle poll: an empty queue behind a lot of published history"
# autovacuum off: this script runs VACUUM itself, at a known moment.
bench_start 55302 "autovacuum = off"
as_postgres createdb -h "$BENCH_WORK" -p "$BENCH_PORT" bench_few

sqlf() { as_postgres psql -h "$BENCH_WORK" -p "$BENCH_PORT" -d "$1" -X -q -v ON_ERROR_STOP=1 "${@:2}"; }

# Common schema in both databases: the naive tables and history() (see lib.sh).
for db in bench bench_few; do
  sqlf "$db" <<EOF
CREATE EXTENSION outbox;
CREATE EXTENSION IF NOT EXISTS pgstattuple;
$(naive_table_sql outbox_naive)
CREATE INDEX outbox_unpublished ON outbox_naive (id) WHERE published_at IS NULL;
$(naive_table_sql outbox_naive_noidx)
$(history_sql)
EOF
done

echo "-- loading $HISTORY_ROWS published events of history into each table ..."
t0=$(date +%s)
# bench: 40 hourly partitions in the past, ending where the installed partitions begin.
sqlf bench <<EOF
SELECT count(outbox._create_partition(lo, lo + interval '1 hour'))
  FROM (SELECT (SELECT min(lower_bound) FROM outbox.partitions) - make_interval(hours => g) AS lo
          FROM generate_series(1, $HISTORY_PARTITIONS) g ORDER BY 1) s \\g /dev/null
EOF
for db in bench bench_few; do
  sqlf "$db" <<EOF
CREATE TEMP TABLE h AS
  SELECT * FROM history($HISTORY_ROWS,
     (SELECT min(lower_bound) FROM outbox.partitions),
     (SELECT CASE WHEN current_database() = 'bench'
                  THEN min(lower_bound) + interval '$HISTORY_PARTITIONS hours'
                  ELSE max(upper_bound) - interval '1 second' END FROM outbox.partitions)) \\g /dev/null
INSERT INTO outbox.events (id, aggregatetype, aggregateid, type, payload, created_at, part_at, published_at)
  SELECT id, 'order', aggregateid, 'OrderPlaced', payload, ts, ts, ts + interval '1 second' FROM h;
INSERT INTO outbox_naive (aggregatetype, aggregateid, type, payload, created_at, published_at)
  SELECT 'order', aggregateid, 'OrderPlaced', payload, ts, ts + interval '1 second' FROM h;
INSERT INTO outbox_naive_noidx (aggregatetype, aggregateid, type, payload, created_at, published_at)
  SELECT 'order', aggregateid, 'OrderPlaced', payload, ts, ts + interval '1 second' FROM h;
-- The burst through the real path, then drained: marked published and VACUUMed.
SELECT count(outbox.enqueue('order', g::text, 'OrderPlaced', jsonb_build_object('order_id', g, 'total', '9.99')))
  FROM generate_series(1, $BURST_ROWS) g \\g /dev/null
INSERT INTO outbox_naive (aggregatetype, aggregateid, type, payload)
  SELECT 'order', g::text, 'OrderPlaced', jsonb_build_object('order_id', g, 'total', '9.99') FROM generate_series(1, $BURST_ROWS) g;
INSERT INTO outbox_naive_noidx (aggregatetype, aggregateid, type, payload)
  SELECT 'order', g::text, 'OrderPlaced', jsonb_build_object('order_id', g, 'total', '9.99') FROM generate_series(1, $BURST_ROWS) g;
UPDATE outbox.events SET published_at = now() WHERE published_at IS NULL;
UPDATE outbox.relay_state SET low_water = (SELECT max(seq) + 1 FROM outbox.events);
UPDATE outbox_naive SET published_at = now() WHERE published_at IS NULL;
UPDATE outbox_naive_noidx SET published_at = now() WHERE published_at IS NULL;
EOF
  sqlf "$db" -c "VACUUM ANALYZE outbox.events" -c "VACUUM ANALYZE outbox_naive" -c "VACUUM ANALYZE outbox_naive_noidx"
done
echo "   loaded in $(($(date +%s) - t0)) s"

# Sizes. partial_index_stats(): over every partial index on a table or its partitions:
# how many, total file bytes, live leaf pages, deleted pages.
sizes() {
  sqlf "$1" -At -F ' ' <<'EOF'
WITH rels AS (
  SELECT 'outbox'::text AS t, inhrelid AS rel FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass
  UNION ALL SELECT 'naive_idx', 'outbox_naive'::regclass
  UNION ALL SELECT 'naive', 'outbox_naive_noidx'::regclass),
heap AS (SELECT t, count(*) AS parts, sum(pg_table_size(rel)) AS heap_bytes
           FROM rels GROUP BY t),
pidx AS (SELECT r.t, count(*) AS n, sum(pg_relation_size(i.indexrelid)) AS bytes,
                sum((pgstatindex(i.indexrelid::regclass::text)).leaf_pages) AS leaf,
                sum((pgstatindex(i.indexrelid::regclass::text)).deleted_pages) AS deleted
           FROM rels r JOIN pg_index i ON i.indrelid = r.rel AND i.indpred IS NOT NULL GROUP BY r.t)
SELECT h.t, h.parts, h.heap_bytes, coalesce(p.n, 0), coalesce(p.bytes, 0), coalesce(p.leaf, 0), coalesce(p.deleted, 0),
       CASE h.t WHEN 'outbox' THEN (SELECT count(*) FROM outbox.events)
                WHEN 'naive_idx' THEN (SELECT count(*) FROM outbox_naive)
                ELSE (SELECT count(*) FROM outbox_naive_noidx) END AS rows
  FROM heap h LEFT JOIN pidx p USING (t) ORDER BY 1;
EOF
}
echo
echo "-- sizes after the burst was published and VACUUMed (queue empty)"
printf '   %-11s %5s %9s %9s | %-43s\n' table parts heap rows "partial index: count, file bytes, live leaf pages, deleted pages"
declare -A HEAP PIDX_BYTES PIDX_N PIDX_LEAF
for db in bench bench_few; do
  while read -r t parts heap n bytes leaf deleted rows; do
    if [ "$t" = outbox ]; then
      name="outbox/${parts}p"
      key=$([ "$db" = bench ] && echo outbox_many || echo outbox_few)
    else
      [ "$db" = bench ] || continue
      name=$t
      key=$t
    fi
    HEAP[$key]=$heap; PIDX_BYTES[$key]=$bytes; PIDX_N[$key]=$n; PIDX_LEAF[$key]=$leaf
    printf '   %-11s %5s %6.1f MB %9s | %3s indexes, %9s bytes, %4s live leaf, %5s deleted\n' \
      "$name" "$parts" "$(awk -v b="$heap" 'BEGIN { print b / 1048576 }')" "$rows" "$n" "$bytes" "$leaf" "$deleted"
  done < <(sizes "$db")
done
NPARTS_MANY=$(sqlf bench -At -c "SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass")
NPARTS_FEW=$(sqlf bench_few -At -c "SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox.events'::regclass")

# Both databases were loaded alike, so their marks are equal; the higher one is used.
LOW_WATER=$( (sqlf bench -At -c "SELECT low_water FROM outbox.relay_state"
              sqlf bench_few -At -c "SELECT low_water FROM outbox.relay_state") | sort -n | tail -1)
POLL_OUTBOX="SELECT seq FROM outbox.events WHERE seq >= $LOW_WATER AND published_at IS NULL AND dead_at IS NULL AND next_attempt_at IS NULL ORDER BY seq LIMIT 100 FOR UPDATE SKIP LOCKED;"
POLL_NAIVE='SELECT id FROM outbox_naive WHERE published_at IS NULL ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED;'
POLL_NOIDX='SELECT id FROM outbox_naive_noidx WHERE published_at IS NULL ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED;'
echo "$POLL_OUTBOX" | bench_file poll_outbox.sql >/dev/null
echo "$POLL_NAIVE" | bench_file poll_naive_idx.sql >/dev/null
echo "$POLL_NOIDX" | bench_file poll_naive.sql >/dev/null
# Diagnostic, not a relay's query (it would miss unpublished rows in older partitions): the
# same poll limited to the current partition by a constant, so that the planner prunes.
CUR_LOWER=$(sqlf bench -At -c "SELECT lower_bound FROM outbox.partitions WHERE lower_bound <= now() AND now() < upper_bound")
POLL_PRUNED="SELECT seq FROM outbox.events WHERE seq >= $LOW_WATER AND published_at IS NULL AND part_at >= '$CUR_LOWER' ORDER BY seq LIMIT 100 FOR UPDATE SKIP LOCKED;"
echo "$POLL_PRUNED" | bench_file poll_pruned.sql >/dev/null

echo
echo "-- one poll under EXPLAIN (ANALYZE, BUFFERS), warm: pages touched"
explain() {  # db query -> "exec_hits planning_hits plan_ms exec_ms top_nodes"
  # The query once first, in the same session: warm caches, as in a relay's session.
  sqlf "$1" -At -c "$2" -c "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) $2" | python3 -c '
import json, sys
p = json.load(sys.stdin)[0]
plan = p["Plan"]
def nodes(n, acc):
    acc.append(n["Node Type"] + (" on " + n["Relation Name"] if "Relation Name" in n else ""))
    for c in n.get("Plans", []): nodes(c, acc)
    return acc
names = nodes(plan, [])
scans = [n for n in names if "Scan" in n]
kinds = sorted(set(n.split(" on ")[0] for n in scans))
print(plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0),
      p.get("Planning", {}).get("Shared Hit Blocks", 0) + p.get("Planning", {}).get("Shared Read Blocks", 0),
      p["Planning Time"], p["Execution Time"], "%d scans (%s)" % (len(scans), ", ".join(kinds)))'
}
declare -A EXEC_PAGES
for spec in "outbox_many bench $POLL_OUTBOX" "outbox_few bench_few $POLL_OUTBOX" \
            "naive_idx bench $POLL_NAIVE" "naive bench $POLL_NOIDX" "outbox_pruned bench $POLL_PRUNED"; do
  read -r key db q <<<"$spec"
  read -r hits phits pms ems what < <(explain "$db" "$q")
  EXEC_PAGES[$key]=$hits
  printf '   %-13s execution: %5s pages, %8.3f ms | planning: %5s pages, %7.3f ms | %s\n' \
    "$key" "$hits" "$ems" "$phits" "$pms" "$what"
done

echo
echo "-- timed polls: $ROUNDS rounds x ${SECONDS_PER_RUN}s per variant and mode, 1 client"
results="$BENCH_WORK/results.txt"
: >"$results"
RUNS=(
  "outbox_many simple bench poll_outbox" "outbox_many prepared bench poll_outbox"
  "outbox_few simple bench_few poll_outbox" "outbox_few prepared bench_few poll_outbox"
  "naive_idx simple bench poll_naive_idx" "naive_idx prepared bench poll_naive_idx"
  "naive simple bench poll_naive" "naive prepared bench poll_naive"
  "outbox_pruned simple bench poll_pruned" "outbox_pruned prepared bench poll_pruned"
)
n=${#RUNS[@]}
for r in $(seq 1 "$ROUNDS"); do
  printf '   round %s/%s:' "$r" "$ROUNDS"
  for k in $(seq 0 $((n - 1))); do
    read -r key mode db file <<<"${RUNS[$(((k + r - 1) % n))]}"
    out="$BENCH_WORK/out.$key.$mode.$r"
    if ! as_postgres pgbench -h "$BENCH_WORK" -p "$BENCH_PORT" -n -M "$mode" -c 1 -T "$SECONDS_PER_RUN" \
         -f "$BENCH_WORK/$file.sql" "$db" >"$out" 2>&1; then
      cat "$out"; exit 1
    fi
    us=$(awk -v ms="$(pgbench_latency "$out")" 'BEGIN { print ms * 1000 }')
    echo "$key $mode $r $us" >>"$results"
    printf ' %s/%s=%.0fus' "$key" "$mode" "$us"
  done
  echo
done

declare -A LAT
echo
printf '   %-45s %12s %12s\n' "median microseconds per poll" "simple" "prepared"
for key in outbox_many outbox_few naive_idx naive outbox_pruned; do
  for mode in simple prepared; do
    LAT[$key.$mode]=$(awk -v k="$key" -v m="$mode" '$1 == k && $2 == m { print $4 }' "$results" | median)
  done
  case $key in
    outbox_many) label="outbox.events, $NPARTS_MANY partitions" ;;
    outbox_few) label="outbox.events, $NPARTS_FEW partitions" ;;
    naive_idx) label="bigserial table + partial index" ;;
    naive) label="bigserial table, no fitting index" ;;
    outbox_pruned) label="(diagnostic) $NPARTS_MANY partitions, pruned to the current" ;;
  esac
  printf '   %-45s %12.1f %12.1f\n' "$label" "${LAT[$key.simple]}" "${LAT[$key.prepared]}"
done
per_part=$(awk -v a="${LAT[outbox_many.prepared]}" -v b="${LAT[outbox_few.prepared]}" \
  -v na="$NPARTS_MANY" -v nb="$NPARTS_FEW" 'BEGIN { printf "%.1f", (a - b) / (na - nb) }')
per_part_s=$(awk -v a="${LAT[outbox_many.simple]}" -v b="${LAT[outbox_few.simple]}" \
  -v na="$NPARTS_MANY" -v nb="$NPARTS_FEW" 'BEGIN { printf "%.1f", (a - b) / (na - nb) }')
echo "   each partition adds about ${per_part_s} us (simple) / ${per_part} us (prepared) to an idle poll"

echo
echo "-- after REINDEX (what VACUUM does not do: give the emptied index pages back)"
for db in bench bench_few; do
  sqlf "$db" -c "REINDEX TABLE outbox_naive" -c "REINDEX INDEX outbox.events_unpublished" 2>/dev/null ||
    sqlf "$db" -c "REINDEX TABLE outbox_naive" -c "REINDEX TABLE outbox.events"
done
REINDEX_NAIVE=$(sqlf bench -At -c "SELECT pg_relation_size('outbox_unpublished')")
REINDEX_OUTBOX=$(sqlf bench -At -c "SELECT count(*) || ' indexes, ' || sum(pg_relation_size(i.indexrelid)) || ' bytes' FROM pg_inherits h JOIN pg_index i ON i.indrelid = h.inhrelid AND i.indpred IS NOT NULL WHERE h.inhparent = 'outbox.events'::regclass")
printf '   %-11s %s bytes\n' "naive_idx" "$REINDEX_NAIVE"
printf '   %-11s %s\n' "outbox/${NPARTS_MANY}p" "$REINDEX_OUTBOX"

mb() { awk -v b="$1" 'BEGIN { printf "%.0f MB", b / 1048576 }'; }
echo
echo "-- targets"
noidx=${LAT[naive.simple]}; idx=${LAT[naive_idx.simple]}
verdict "without a fitting index the idle poll scans the history: naive $(printf '%.1f' "$(awk -v x="$noidx" 'BEGIN { print x / 1000 }')") ms on $(mb "${HEAP[naive]}") (article: 24 ms on 71 MB; here before: 61 ms on 58 MB)" \
  "$(awk -v x="$noidx" 'BEGIN { print (x >= 5000) ? 1 : 0 }')"
verdict "the partial index makes it cheap: naive+idx $(printf '%.0f' "$idx") us simple / $(printf '%.0f' "${LAT[naive_idx.prepared]}") us prepared (article: 53 us; here before: 160 us), $(awk -v a="$noidx" -v b="$idx" 'BEGIN { printf "%.0f", a / b }')x faster" \
  "$(awk -v x="$idx" 'BEGIN { print (x <= 200) ? 1 : 0 }')"
for key in outbox_many outbox_few; do
  np=$([ "$key" = outbox_many ] && echo "$NPARTS_MANY" || echo "$NPARTS_FEW")
  verdict "outbox.events ($np partitions, $(mb "${HEAP[$key]}")) polls about as cheaply as the partial index on one table (within 2x, both modes): $(printf '%.0f' "${LAT[$key.simple]}") us simple / $(printf '%.0f' "${LAT[$key.prepared]}") us prepared vs $(printf '%.0f' "${LAT[naive_idx.simple]}") / $(printf '%.0f' "${LAT[naive_idx.prepared]}") us" \
    "$(awk -v a="${LAT[$key.simple]}" -v b="${LAT[$key.prepared]}" -v c="${LAT[naive_idx.simple]}" -v d="${LAT[naive_idx.prepared]}" 'BEGIN { print (a <= 2 * c && b <= 2 * d) ? 1 : 0 }')"
  verdict "outbox.events ($np partitions): an idle poll reads one index page (reads ${EXEC_PAGES[$key]} pages)" \
    "$(awk -v x="${EXEC_PAGES[$key]}" 'BEGIN { print (x <= 1) ? 1 : 0 }')"
done
verdict "the article's partial index holds one live page when the queue is empty: ${PIDX_LEAF[naive_idx]} live leaf page(s); file ${PIDX_BYTES[naive_idx]} bytes" \
  "$(awk -v x="${PIDX_LEAF[naive_idx]}" 'BEGIN { print (x <= 1) ? 1 : 0 }')"
verdict "outbox.events' partial indexes hold at most one live page each when the queue is empty: ${PIDX_N[outbox_many]} indexes, ${PIDX_LEAF[outbox_many]} live leaf page(s); files ${PIDX_BYTES[outbox_many]} bytes" \
  "$(awk -v x="${PIDX_LEAF[outbox_many]}" -v n="${PIDX_N[outbox_many]}" 'BEGIN { print (x <= n) ? 1 : 0 }')"
echo "        file sizes: VACUUM empties the pages the burst filled but does not shrink the file; the"
echo "        article's 8192 bytes (one metapage) is an index that never held the burst, or one after"
echo "        REINDEX (see above): naive+idx ${REINDEX_NAIVE} bytes, outbox ${REINDEX_OUTBOX}"
