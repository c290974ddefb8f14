#!/usr/bin/env bash
# Installs everything outbox needs to build, test and benchmark on Debian 12 (run as root).
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail

# Installing postgresql-15 on a machine without it creates and starts Debian's main cluster
# (postgresql@15-main, port 5432), as Debian's package does; nothing here uses that cluster.
packages=(
  # build: the extension (boost: flat_map in the relay), its Kafka, HTTP and NATS sinks
  build-essential postgresql-server-dev-15 libboost-dev librdkafka-dev libcurl4-openssl-dev
  libssl-dev libnats-dev
  # the PostgreSQL the tests and the demo run by default
  postgresql-15
  # tests: pg_stat_statements (TAP 018; pgstattuple for bench/), pg_cron (TAP 001),
  # IPC::Run (TAP), kcat (reads Kafka topics back), unit tests, make format-check,
  # nats-server (the NATS sink's unit and TAP tests, demo.sh --sink nats, bench/relay/sinks.sh)
  postgresql-contrib postgresql-15-cron libipc-run-perl kcat libgtest-dev clang-format
  nats-server
  # TAP 031: the receiver's self-signed certificate
  openssl
  # bench/relay/relaybench.py, examples/python (TAP 024)
  python3-psycopg
  # bench/relay/faults.sh: a webhook receiver that is never the bottleneck (answers 204)
  nginx-light
  # monitoring/ (TAP 045, test/monitoring.sh): promtool checks the metrics and tests the
  # alert rules; the exporter scrapes with monitoring/postgres_exporter.yml
  prometheus prometheus-postgres-exporter
)
# examples/node (TAP 024) and test/consumers (TAP 011, 030, 031; the demo and bench with the
# http and nats sinks): Node.js and npm, from Debian unless some Node.js is there already
# (NodeSource's nodejs brings its own npm and conflicts with Debian's).
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
