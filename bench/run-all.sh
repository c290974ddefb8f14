#!/usr/bin/env bash
# Runs every storage-layer benchmark, one after the other (each starts and stops its own
# PostgreSQL cluster). Full set: about 10.5 minutes on 2 cores; QUICK=1: about 4 minutes.
#   bash bench/run-all.sh
#   QUICK=1 bash bench/run-all.sh
# Output goes to the terminal and to bench/results/<UTC time>.txt (not committed).
# Run it on an otherwise idle machine: the numbers are timings, and a concurrent build or
# test run moves them a lot. Do not `make install` while it runs: a library replaced under
# a running server can crash it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/results"
suffix=""
[ "${QUICK:-0}" = 1 ] && suffix="-quick"
out="$here/results/$(date -u +%Y%m%dT%H%M%SZ)$suffix.txt"
{
  for b in cost idle_poll rotation inbox; do
    start=$(date +%s)
    if bash "$here/$b.sh"; then
      echo "   ($b: $(($(date +%s) - start)) s)"
    else
      echo "   ($b FAILED after $(($(date +%s) - start)) s)"
    fi
    echo
  done
  echo "== summary of the targets"
} 2>&1 | tee "$out"
grep -hE '^(MET|MISSED) ' "$out" | tee -a "$out"
echo "(full output: $out)"
grep -q 'FAILED after' "$out" && exit 1
exit 0
