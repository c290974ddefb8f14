#!/usr/bin/env bash
# Builds outbox in a copy of this tree and installs it into the PostgreSQL installation of the
# pg_config given (run as root for a system installation):
#   bash scripts/install-into.sh /opt/outbox-pg15-cassert/bin/pg_config
# For a second installation beside the one this tree is built for: the tree's own objects
# stay those of its PostgreSQL (objects are rebuilt whenever PG_CONFIG changes). The sink
# libraries, which no PostgreSQL header goes into, are copied when built, not rebuilt.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash scripts/install-into.sh PG_CONFIG" >&2; exit 2; }
pg_config=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(mktemp -d "${TMPDIR:-/tmp}/outbox-build.XXXXXX")
trap 'rm -rf "$build"' EXIT
cd "$repo"
cp -a Makefile outbox.control outbox--*.sql src "$build/"
for lib in outbox_sink_*.so; do
  if [ -f "$lib" ]; then cp -a "$lib" "$build/"; fi
done
make -s -C "$build" -j"$(nproc)" PG_CONFIG="$pg_config" all >/dev/null
make -s -C "$build" install PG_CONFIG="$pg_config" >/dev/null
