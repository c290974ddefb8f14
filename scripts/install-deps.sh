#!/usr/bin/env bash
# Installs what outbox needs on Debian 12 (run as root):
#   bash scripts/install-deps.sh            # to build it and run it: scripts/demo.sh uses these
#   bash scripts/install-deps.sh --tests    # and what the tests and bench/ need besides:
#                                           # test/run-tests.sh uses these
# Only what is missing is installed, through scripts/apt.sh: no installed package is
# upgraded unless apt finds no way around it, and then it says which before it starts
# (OUTBOX_NO_UPGRADE=1 refuses instead); services the packages bring are not started.
# Nothing is printed when everything is there already.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

tests=false
case "${1:-}" in
  "") ;;
  --tests) tests=true ;;
  *) echo "usage: bash scripts/install-deps.sh [--tests]" >&2; exit 2 ;;
esac

# Installing postgresql-15 on a machine without it creates Debian's main cluster
# (postgresql@15-main, port 5432), not started here; nothing here uses that cluster.
packages=(
  # build: the extension (boost: flat_map in the relay), its Kafka, HTTP and NATS sinks
  build-essential postgresql-server-dev-15 libboost-dev librdkafka-dev libcurl4-openssl-dev
  libssl-dev libnats-dev
  # the PostgreSQL the demo and the tests run by default
  postgresql-15
  # the demo's receivers: kcat reads Kafka topics back (also the TAP tests), nats-server
  # (demo.sh --sink nats; the NATS sink's unit and TAP tests), openssl makes the webhook
  # secret (demo.sh --sink http; TAP 031's self-signed certificate)
  kcat nats-server openssl
)
test_packages=(
  # pg_stat_statements (TAP 018; pgstattuple for bench/), pg_cron (TAP 001), IPC::Run (TAP),
  # GoogleTest (the unit tests), make format-check
  postgresql-contrib postgresql-15-cron libipc-run-perl libgtest-dev clang-format
  # bench/relay/relaybench.py, examples/python (TAP 024)
  python3-psycopg
  # bench/relay/faults.sh: a webhook receiver that is never the bottleneck (answers 204)
  nginx-light
  # monitoring/ (TAP 045, test/monitoring.sh): promtool checks the metrics and tests the
  # alert rules; the exporter scrapes with monitoring/postgres_exporter.yml
  prometheus prometheus-postgres-exporter
)
$tests && packages+=("${test_packages[@]}")
# test/consumers (the demo with the http and nats sinks; TAP 011, 030, 031) and
# examples/node (TAP 024): Node.js and npm, from Debian unless some Node.js is there
# already (NodeSource's nodejs brings its own npm and conflicts with Debian's).
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)

# shellcheck source=scripts/apt.sh
. "$repo/scripts/apt.sh"
trap progress_stop EXIT
apt_install "${packages[@]}"
