#!/usr/bin/env bash
# The consumer's inbox: what outbox.inbox_receive() costs against the hand-made way of
# deduplicating, an INSERT ... ON CONFLICT DO NOTHING into an indexed table (issue #28:
# at most 1.2x, one run, side by side).
#
# Two ways of recording that consumer 'billing' received an event, in the same cluster:
#   inbox  SELECT outbox.inbox_receive('billing', id, now()): one INSERT ... ON CONFLICT DO
#          NOTHING into the partition of outbox.inbox that holds the event's time, from C
#          (a plan prepared per partition and backend); SECURITY DEFINER
#   hand   INSERT INTO hand_inbox (consumer, event_id) VALUES ('billing', id)
#          ON CONFLICT DO NOTHING, hand_inbox being unpartitioned with PRIMARY KEY
#          (consumer, event_id) and a received_at column defaulting to now(), as the inbox's
# each for a new event (a gen_random_uuid() id, so inbox_receive is given the event's time:
# now(); the true path, one row written and its commit flushed) and for a duplicate (an id
# recorded at setup in both tables: the false path, nothing written, no WAL to flush).
#
# All four run in the same pgbench runs, mixed transaction by transaction (-f script@1 for
# each, autocommit, -M prepared), 1 client and 4 clients (-j 2): this VM's fsync time wanders
# by tens of percent from one second to the next, so variants in separate runs would not
# meet the same disk. Reported: the median latency of one call per variant, and inbox / hand
# as the median of the per-round ratios. With one client, a second mixed run per round has
# synchronous_commit = off (the commit does not wait for its fsync): what is left is the
# round trip and the server's CPU. Then a diagnostic without fsync and round trips: N calls
# of each in one PL/pgSQL loop (rolled back), microseconds per call, with the INSERT that
# inbox_receive runs inside, written by hand into the partition and into outbox.inbox.
#
#   bash bench/inbox.sh            # 6 rounds of 8 s mixed runs, 1 and 4 clients (~2.5 min)
#   QUICK=1 bash bench/inbox.sh    # about a minute
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

if [ "$QUICK" = 1 ]; then
  ROUNDS=${ROUNDS:-3}; MIX_SECONDS=4; ASYNC_SECONDS=2; DIAG_CALLS=5000; DIAG_ROUNDS=3
else
  ROUNDS=${ROUNDS:-6}; MIX_SECONDS=8; ASYNC_SECONDS=4; DIAG_CALLS=30000; DIAG_ROUNDS=5
fi
CLIENTS=${CLIENTS:-"1 4"}
# Ids recorded at setup in both tables, for the duplicate variants: as many as one
# diagnostic loop calls, so that every call of a duplicate loop meets its record.
DUPS=$DIAG_CALLS

bench_header "inbox: outbox.inbox_receive() against a hand INSERT ... ON CONFLICT DO NOTHING"
# autovacuum off: both tables only grow by INSERT; an autovacuum run in the middle of a run
# would be noise, not a cost of either variant.
bench_start 55341 "autovacuum = off"

# The duplicates' event time: a constant inside a partition that exists (inbox_receive's
# first call makes the partitions from outbox.inbox_retention back to outbox.premake days
# ahead), so that a run across midnight UTC still finds each record where it was made.
T0=$(sqlv "SELECT now()")
sql >/dev/null <<EOF
CREATE EXTENSION outbox;
CREATE TABLE hand_inbox (
    consumer    text        NOT NULL,
    event_id    uuid        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
-- The first call makes the inbox's partitions.
SELECT outbox.inbox_receive('billing', gen_random_uuid(), now());
INSERT INTO hand_inbox (consumer, event_id) VALUES ('billing', gen_random_uuid());
-- The ids the duplicate variants send again: md5(n) for n in 1..$DUPS, spread over the index
-- as random ids are, with version nibble 4 (a UUIDv7-shaped id would carry its own time).
SELECT count(*) FILTER (WHERE outbox.inbox_receive('billing', overlay(md5(i::text) placing '4' from 13)::uuid, '$T0'))
  FROM generate_series(1, $DUPS) i;
INSERT INTO hand_inbox (consumer, event_id)
SELECT 'billing', overlay(md5(i::text) placing '4' from 13)::uuid FROM generate_series(1, $DUPS) i;
VACUUM ANALYZE hand_inbox;
VACUUM ANALYZE outbox.inbox;
CHECKPOINT;
EOF
n_inbox=$(sqlv "SELECT count(*) FROM outbox.inbox")
n_hand=$(sqlv "SELECT count(*) FROM hand_inbox")
n_parts=$(sqlv "SELECT count(*) FROM outbox.inbox_partitions")
echo "   setup: $n_parts inbox partitions; $n_inbox records in outbox.inbox, $n_hand in hand_inbox"
if [ "$(sqlv "SELECT outbox.inbox_receive('billing', overlay(md5('1') placing '4' from 13)::uuid, '$T0')")" != f ]; then
  echo "inbox_receive did not see a recorded id as a duplicate" >&2
  exit 1
fi

bench_file inbox.sql >/dev/null <<'EOF'
SELECT outbox.inbox_receive('billing', gen_random_uuid(), now());
EOF
bench_file hand.sql >/dev/null <<'EOF'
INSERT INTO hand_inbox (consumer, event_id) VALUES ('billing', gen_random_uuid()) ON CONFLICT DO NOTHING;
EOF
bench_file inbox_dup.sql >/dev/null <<EOF
\\set n random(1, $DUPS)
SELECT outbox.inbox_receive('billing', overlay(md5(:n::text) placing '4' from 13)::uuid, '$T0');
EOF
bench_file hand_dup.sql >/dev/null <<EOF
\\set n random(1, $DUPS)
INSERT INTO hand_inbox (consumer, event_id) VALUES ('billing', overlay(md5(:n::text) placing '4' from 13)::uuid) ON CONFLICT DO NOTHING;
EOF

MIX="inbox hand inbox_dup hand_dup"
declare -A LABEL=(
  [inbox]="new event: outbox.inbox_receive()"
  [hand]="new event: hand INSERT ... ON CONFLICT DO NOTHING"
  [inbox_dup]="duplicate: outbox.inbox_receive()"
  [hand_dup]="duplicate: hand INSERT ... ON CONFLICT DO NOTHING"
)
declare -A HAND=([inbox]=hand [inbox_dup]=hand_dup)

# One pgbench run per client count, round and mode mixes the four variants (bench_mix,
# lib.sh); "clients round variant latency_ms tps" per variant, in one file per mode: sync,
# and async (synchronous_commit = off for the sessions).
declare -A RESULTS=([sync]="$BENCH_WORK/results.sync.txt" [async]="$BENCH_WORK/results.async.txt")
mix() {  # mix CLIENTS ROUND MODE SECONDS
  local opts=""
  [ "$3" = async ] && opts="-c synchronous_commit=off"
  # shellcheck disable=SC2086 # MIX is a list of variant names
  PGOPTIONS="$opts" bench_mix "${RESULTS[$3]}" "$1" "$2" "$4" $MIX
}
: >"${RESULTS[sync]}"
: >"${RESULTS[async]}"

# Warm-up: caches, each backend's plans, the tables' first pages.
mix 1 0 sync 2
: >"${RESULTS[sync]}"

for r in $(seq 1 "$ROUNDS"); do
  for c in $CLIENTS; do
    mix "$c" "$r" sync "$MIX_SECONDS"
    [ "$c" = 1 ] && mix 1 "$r" async "$ASYNC_SECONDS"
  done
  printf '   round %s/%s:' "$r" "$ROUNDS"
  for m in sync async; do
    awk -v r="$r" -v a="$([ $m = async ] && echo a)" '$2 == r { printf " c%s%s/%s=%.0fus", $1, a, $3, $4 * 1000 }' "${RESULTS[$m]}"
  done
  echo
done

# col CLIENTS MODE VARIANT: the variant's latency in each round, microseconds.
col() { awk -v c="$1" -v v="$3" '$1 == c && $3 == v { print $4 * 1000 }' "${RESULTS[$2]}"; }
# paired CLIENTS MODE VARIANT: median over the rounds of variant / its hand counterpart.
paired() {
  awk -v c="$1" -v v="$3" -v h="${HAND[$3]}" '
    $1 == c && $3 == v { t[$2] = $4 } $1 == c && $3 == h { s[$2] = $4 }
    END { for (r in t) if (r in s) print t[r] / s[r] }' "${RESULTS[$2]}" | median
}

echo
echo "-- per-call latency: $ROUNDS rounds; in each, one pgbench run of ${MIX_SECONDS}s per client count mixes"
echo "   the four variants call by call (autocommit, -M prepared; with 1 client also a ${ASYNC_SECONDS}s run"
echo "   with synchronous_commit = off). us/call = median latency; inbox/hand = median of the"
echo "   per-round ratios"
declare -A RAT
for c in $CLIENTS; do
  modes=sync
  [ "$c" = 1 ] && modes="sync async"
  for m in $modes; do
    echo
    if [ "$m" = sync ]; then echo "   clients=$c"; else echo "   clients=$c, synchronous_commit = off (no fsync wait)"; fi
    printf '   %-52s %9s %9s %9s %11s\n' variant "us/call" min max "inbox/hand"
    for v in $MIX; do
      med=$(col "$c" "$m" "$v" | median)
      min=$(col "$c" "$m" "$v" | sort -g | head -n 1)
      max=$(col "$c" "$m" "$v" | sort -g | tail -n 1)
      rat=""
      if [ -n "${HAND[$v]:-}" ]; then
        RAT[$c.$m.$v]=$(paired "$c" "$m" "$v")
        rat=$(printf '%.2fx' "${RAT[$c.$m.$v]}")
      fi
      printf '   %-52s %9.0f %9.0f %9.0f %11s\n' "${LABEL[$v]}" "$med" "$min" "$max" "$rat"
    done
  done
done
n_inbox=$(sqlv "SELECT count(*) FROM outbox.inbox")
n_hand=$(sqlv "SELECT count(*) FROM hand_inbox")
echo
echo "   records after the runs: $n_inbox in outbox.inbox, $n_hand in hand_inbox"

echo
echo "-- diagnostic: server CPU per call, no fsync, no round trip ($DIAG_ROUNDS rounds of $DIAG_CALLS calls"
echo "   in one PL/pgSQL loop, rolled back, both tables vacuumed before each round, the order of"
echo "   the loops rotating; median microseconds per call)"
# The partition of now(): what inbox_receive's prepared INSERT writes into.
PART=$(sqlv "SELECT format('outbox.%I', name) FROM outbox.inbox_partitions WHERE now() >= lower_bound AND now() < upper_bound")
declare -A DIAG=(
  [a_loop]="PERFORM i"
  [b_random]="PERFORM gen_random_uuid()"
  [c_inbox]="PERFORM outbox.inbox_receive('billing', gen_random_uuid(), now())"
  [d_hand]="INSERT INTO hand_inbox (consumer, event_id) VALUES ('billing', gen_random_uuid()) ON CONFLICT DO NOTHING"
  [e_part]="INSERT INTO $PART (event_at, event_id, consumer) VALUES (now(), gen_random_uuid(), 'billing') ON CONFLICT DO NOTHING"
  [f_routed]="INSERT INTO outbox.inbox (event_at, event_id, consumer) VALUES (now(), gen_random_uuid(), 'billing') ON CONFLICT DO NOTHING"
  [g_md5]="PERFORM overlay(md5(i::text) placing '4' from 13)::uuid"
  [h_inbox_dup]="PERFORM outbox.inbox_receive('billing', overlay(md5(i::text) placing '4' from 13)::uuid, '$T0')"
  [i_hand_dup]="INSERT INTO hand_inbox (consumer, event_id) VALUES ('billing', overlay(md5(i::text) placing '4' from 13)::uuid) ON CONFLICT DO NOTHING"
)
declare -A DIAG_LABEL=(
  [a_loop]="empty loop iteration"
  [b_random]="gen_random_uuid() (the new events' id)"
  [c_inbox]="new event: outbox.inbox_receive()"
  [d_hand]="new event: hand INSERT into hand_inbox"
  [e_part]="  its INSERT, by hand, into the partition of now()"
  [f_routed]="  the same INSERT into outbox.inbox (routed)"
  [g_md5]="md5(i) as a v4-shaped uuid (the duplicates' id)"
  [h_inbox_dup]="duplicate: outbox.inbox_receive()"
  [i_hand_dup]="duplicate: hand INSERT into hand_inbox"
)
mapfile -t DIAG_KEYS < <(printf '%s\n' "${!DIAG[@]}" | sort)
diag="$BENCH_WORK/diag.txt"
: >"$diag"
for r in $(seq 1 "$DIAG_ROUNDS"); do
  n=${#DIAG_KEYS[@]}
  for k in $(seq 0 $((n - 1))); do
    d=${DIAG_KEYS[$(((k + r) % n))]}
    sql -c "VACUUM hand_inbox" -c "VACUUM outbox.inbox"
    ms=$(sql -c "BEGIN" -c '\timing on' -c "DO \$\$ BEGIN FOR i IN 1..$DIAG_CALLS LOOP ${DIAG[$d]}; END LOOP; END \$\$" -c '\timing off' -c "ROLLBACK" |
      sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -g | tail -n 1)
    echo "$d $(awk -v ms="$ms" -v n="$DIAG_CALLS" 'BEGIN { print 1000 * ms / n }')" >>"$diag"
  done
done
dmed() { awk -v d="$1" '$1 == d { print $2 }' "$diag" | median; }
# dpaired A B: median over the rounds of A / B (the loops of one round ran back to back).
dpaired() {
  awk -v a="$1" -v b="$2" '$1 == a { x[++i] = $2 } $1 == b { y[++j] = $2 }
    END { for (k = 1; k <= i && k <= j; k++) print x[k] / y[k] }' "$diag" | median
}
for d in "${DIAG_KEYS[@]}"; do
  printf '   %-52s %6.1f us\n' "${DIAG_LABEL[$d]}" "$(dmed "$d")"
done
row_inbox=$(sqlv "SELECT round(avg(pg_column_size(x.*))) FROM (SELECT * FROM outbox.inbox LIMIT 1000) x")
row_hand=$(sqlv "SELECT round(avg(pg_column_size(x.*))) FROM (SELECT * FROM hand_inbox LIMIT 1000) x")
echo "   row size: outbox.inbox ${row_inbox} bytes, hand_inbox ${row_hand} bytes (pg_column_size of the row)"
cpu_new=$(dpaired c_inbox d_hand)
cpu_dup=$(dpaired h_inbox_dup i_hand_dup)
echo "   inbox/hand, median of the per-round ratios: new event $(printf '%.2fx' "$cpu_new"), duplicate $(printf '%.2fx' "$cpu_dup")"

echo
echo "-- targets of issue #28 (inbox_receive at most 1.2x a hand INSERT ... ON CONFLICT DO NOTHING)"
# le12 X: 1 when X <= 1.2.
le12() { awk -v x="$1" 'BEGIN { print (x <= 1.2) ? 1 : 0 }'; }
for c in $CLIENTS; do
  for v in inbox inbox_dup; do
    what="new event"
    [ "$v" = inbox_dup ] && what="duplicate"
    x=${RAT[$c.sync.$v]}
    verdict "clients=$c, $what: per-call latency at most 1.2x the hand INSERT's (measured $(printf '%.2fx: %.0f vs %.0f us' "$x" "$(col "$c" sync "$v" | median)" "$(col "$c" sync "${HAND[$v]}" | median)"))" \
      "$(le12 "$x")"
  done
done
verdict "server CPU per call, new event: at most 1.2x the hand INSERT (measured $(printf '%.2fx: %.1f vs %.1f us' "$cpu_new" "$(dmed c_inbox)" "$(dmed d_hand)"))" \
  "$(le12 "$cpu_new")"
verdict "server CPU per call, duplicate: at most 1.2x the hand INSERT (measured $(printf '%.2fx: %.1f vs %.1f us' "$cpu_dup" "$(dmed h_inbox_dup)" "$(dmed i_hand_dup)"))" \
  "$(le12 "$cpu_dup")"
