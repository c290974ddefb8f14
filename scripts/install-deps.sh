#!/usr/bin/env bash
# Installs everything outbox needs to build, test and benchmark on Debian 12 (run as root).
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail

packages=(
  build-essential
  postgresql-15 postgresql-server-dev-15 postgresql-contrib postgresql-15-cron
  libipc-run-perl
  libboost-dev
  librdkafka-dev kcat
  libnats-dev nats-server
  libcurl4-openssl-dev libssl-dev
  libgtest-dev clang-format
  python3-psycopg
)

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
