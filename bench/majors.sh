#!/usr/bin/env bash
# The same two benchmarks on several PostgreSQL installations, side by side in one run:
# bench/cost.sh (what enqueue() adds to the business transaction) and
# bench/relay/throughput_paired.sh (the relay's drain against the server-side loop). Each
# round runs both on every installation, in an order that alternates from one round to the
# next (A B C, then C B A), so that a drift of the machine falls on each alike. Reported: the
# median over rounds of each figure per installation, and its ratio to the first one (for a
# cost in %, the difference in points).
#
# Installations (name=pg_config), by default:
#   15-src    15.18 built from Debian's source package (scripts/build-pg.sh 15), as 18 is:
#             the same compiler flags, so that 18 / 15-src is what the major changes
#   18        18.6 built from Debian's source package (scripts/build-pg.sh 18)
#   15        Debian 12's PostgreSQL 15 (its packages, its build flags): 15 / 15-src is what
#             Debian's build changes
# outbox is built and installed into each (scripts/install-into.sh).
#
#   bash bench/majors.sh                 # 2 rounds of QUICK=1 runs, about 20 minutes
#   ROUNDS=3 FULL=1 bash bench/majors.sh # full-length runs of both benchmarks
#   MAJORS="15=/usr/lib/postgresql/15/bin/pg_config 18=/opt/outbox-pg18/bin/pg_config" bash bench/majors.sh
#   bash bench/majors.sh --report bench/results/majors-<time>   # the table again, from a run's outputs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
ROUNDS=${ROUNDS:-2}
quick=1
[ "${FULL:-0}" = 1 ] && quick=0

report_only=false
if [ "${1:-}" = --report ]; then
  out=${2:?usage: bash bench/majors.sh --report DIR}
  report_only=true
  MAJORS=$(cat "$out/majors.txt")
  ROUNDS=$(cat "$out/rounds.txt")
elif [ -z "${MAJORS:-}" ]; then
  MAJORS="15-src=$(bash "$repo/scripts/build-pg.sh" 15)"
  MAJORS+=" 18=$(bash "$repo/scripts/build-pg.sh" 18)"
  MAJORS+=" 15=/usr/lib/postgresql/15/bin/pg_config"
fi
read -r -a majors <<<"$MAJORS"
if ! $report_only; then
  for m in "${majors[@]}"; do
    echo "== installing outbox into ${m%%=*}: $("${m#*=}" --version) (${m#*=})"
    bash "$repo/scripts/install-into.sh" "${m#*=}"
  done
  out="$here/results/majors-$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$out"
  echo "$MAJORS" >"$out/majors.txt"
  echo "$ROUNDS" >"$out/rounds.txt"
  echo "== outputs in $out"
fi

# Figures: name, the file (cost or drain), the line's label, the field to take from the end
# of the line (1: last).
figures=(
  "enqueue cost, interactive, 1 client|cost|interactive: order + outbox.enqueue()|1|1"
  "enqueue cost, interactive, 4 clients|cost|interactive: order + outbox.enqueue()|1|4"
  "hand INSERT cost, interactive, 1 client|cost|interactive: order + hand INSERT (bigserial table)|1|1"
  "enqueue cost, one statement, 4 clients|cost|one-stmt:    order + outbox.enqueue()|1|4"
  "order-only transaction, 1 client (us)|cost|interactive: order only (baseline)|5|1"
  "enqueue() server CPU per event (us)|cost|outbox.enqueue() (C, SPI, SECURITY DEFINER)|2|-"
  "INSERT into the bigserial table (us)|cost|INSERT into the bigserial table (7 cols, 2 indexes)|2|-"
  "INSERT straight into outbox.events (us)|cost|INSERT straight into outbox.events (partitioned)|2|-"
  "relay drain, null sink (events/s)|drain|relay worker, null sink|0|-"
  "server-side loop drain (events/s)|drain|server-side loop (plpgsql)|0|-"
  "relay / server-side loop (x)|drain|relay worker, null sink|x|-"
)

# value FILE LABEL FIELD CLIENTS: the figure from one output. FIELD n: the n-th field from
# the end; 0: the number after the label; x: the relay's "x loop" ratio. CLIENTS: the
# "clients=N" block the line is in (- for none).
value() {
  [ -f "$1" ] || return 0
  awk -v label="$2" -v field="$3" -v clients="$4" '
    /^   clients=/ { block = substr($1, 9) }
    index($0, "   " label) == 1 && (clients == "-" || block == clients) {
      rest = substr($0, length(label) + 4)
      n = split(rest, f, " ")
      if (field == "x") { for (i = 1; i <= n; i++) if (f[i] ~ /x$/) { v = f[i]; break } }
      else if (field == 0) v = f[1]
      else v = f[n - field + 1]
      gsub(/[x%]/, "", v); gsub(/^\+/, "", v)
      print v; exit
    }' "$1"
}

for r in $(seq 1 "$ROUNDS"); do
  $report_only && break
  order=("${majors[@]}")
  if [ $((r % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#majors[@]} - 1; i >= 0; i--)); do order+=("${majors[$i]}"); done
  fi
  for m in "${order[@]}"; do
    name=${m%%=*}
    echo "== round $r/$ROUNDS: $name"
    PG_CONFIG=${m#*=} QUICK=$quick bash "$here/cost.sh" >"$out/cost.$name.$r.txt" 2>&1 ||
      { echo "cost.sh failed on $name:"; tail -20 "$out/cost.$name.$r.txt"; exit 1; }
    PG_CONFIG=${m#*=} QUICK=$quick bash "$here/relay/throughput_paired.sh" >"$out/drain.$name.$r.txt" 2>&1 ||
      { echo "throughput_paired.sh failed on $name:"; tail -20 "$out/drain.$name.$r.txt"; exit 1; }
  done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "-- installations"
for m in "${majors[@]}"; do
  printf '   %-8s %s (%s)\n' "${m%%=*}" "$("${m#*=}" --version)" "$("${m#*=}" --configure | grep -o "CFLAGS=[^']*" | head -1)"
done
echo
echo "-- results: median of $ROUNDS rounds (costs: % over the order-only transaction of the same"
echo "   shape, as cost.sh reports them); against ${majors[0]%%=*}: the ratio, or for a cost the"
echo "   difference in percentage points"
header=$(printf '%-42s' figure)
for m in "${majors[@]}"; do header+=$(printf ' %10s' "${m%%=*}"); done
for m in "${majors[@]:1}"; do header+=$(printf ' %12s' "${m%%=*}/${majors[0]%%=*}"); done
echo "   $header"
for fig in "${figures[@]}"; do
  IFS='|' read -r title file label field clients <<<"$fig"
  line=$(printf '%-42s' "$title")
  vals=()
  for m in "${majors[@]}"; do
    v=$(for r in $(seq 1 "$ROUNDS"); do value "$out/$file.${m%%=*}.$r.txt" "$label" "$field" "$clients"; done | median)
    vals+=("${v:-nan}")
    line+=$(printf ' %10s' "${v:-?}")
  done
  for v in "${vals[@]:1}"; do
    line+=$(awk -v a="$v" -v b="${vals[0]}" -v cost="$([[ $title == *cost* ]] && echo 1)" 'BEGIN {
      if (a == "nan" || b == "nan") printf " %12s", "-"
      else if (cost) printf " %+9.1f pt", a - b
      else if (b + 0 != 0) printf " %11.2fx", a / b
      else printf " %12s", "-" }')
  done
  echo "   $line"
done
