# shellcheck shell=bash
# Sourced by every script that starts a throwaway PostgreSQL cluster (scripts/demo.sh,
# test/run-tests.sh, bench/lib.sh, bench/relay/lib.sh): the one way to make, start, stop and
# remove one. The server runs as the postgres user (it refuses to run as root), in a temp
# directory that user owns. The TAP tests use PostgreSQL::Test::Cluster instead.
# PG_CONFIG picks the PostgreSQL installation: pg_config on PATH (Debian's) by default. Its
# bindir goes first in PATH, so that initdb, pg_ctl, psql, pgbench and pg_config are its.
pg_config_wanted=${PG_CONFIG:-pg_config}
PG_CONFIG=$(command -v "$pg_config_wanted") || {
  echo "pg-env.sh: no $pg_config_wanted: is PostgreSQL installed?" >&2
  return 1
}
PG_BINDIR=$("$PG_CONFIG" --bindir)
export PG_CONFIG PG_BINDIR
export PATH="$PG_BINDIR:$PATH"

# as_postgres CMD...: run a command as the postgres user (or as is, when already not root).
as_postgres() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- env "PATH=$PATH" "$@"
  else
    "$@"
  fi
}

# make_workdir: a fresh directory the postgres user owns; prints its path.
make_workdir() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/outbox.XXXXXX")
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  echo "$dir"
}

# A cluster lives in a make_workdir directory DIR: data directory DIR/data, server log
# DIR/server.log, Unix socket in DIR (psql -h DIR -p PORT).

# cluster_init DIR [INITDB_OPTION...]: initdb, trust authentication, superuser postgres,
# UTF8; the options (default --no-locale) come last. Its output goes to DIR/initdb.log,
# shown when it fails.
cluster_init() {
  local dir=$1
  shift
  [ $# -gt 0 ] || set -- --no-locale
  as_postgres initdb -D "$dir/data" -A trust -U postgres --encoding=UTF8 "$@" \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
}

# cluster_configure DIR PORT [SETTING...]: appends to postgresql.conf: listen on 127.0.0.1
# and a Unix socket in DIR, on PORT, then the caller's settings (postgresql.conf lines; a
# later line wins, so "listen_addresses = ''" makes it a socket-only server).
cluster_configure() {
  local dir=$1 port=$2 line
  shift 2
  {
    echo "listen_addresses = '127.0.0.1'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir'"
    for line in "$@"; do echo "$line"; done
  } >>"$dir/data/postgresql.conf"
}

# cluster_start DIR [WRAPPER...]: starts the server and waits until it accepts connections;
# shows the server log when it does not start. WRAPPER (root only) is a command that runs
# its arguments, as root, around the start: for example
#   unshare --mount --propagation private sh -c 'mount --bind A B && exec "$@"' sh
# runs the server in a mount namespace of its own (bench/relay/lib.sh).
cluster_start() {
  local dir=$1
  shift
  local start=(pg_ctl -D "$dir/data" -l "$dir/server.log" -w start)
  if [ $# -gt 0 ]; then
    "$@" runuser -u postgres -- env "PATH=$PATH" "${start[@]}" >/dev/null
  else
    as_postgres "${start[@]}" >/dev/null
  fi || { cat "$dir/server.log" >&2 2>/dev/null; return 1; }
}

# cluster_stop DIR [MODE]: stops DIR's server if it runs (pg_ctl -m MODE, default fast;
# immediate for a cluster about to be thrown away). Never fails.
cluster_stop() {
  [ -f "$1/data/postmaster.pid" ] || return 0
  as_postgres pg_ctl -D "$1/data" -m "${2:-fast}" -w stop >/dev/null 2>&1 || true
}

# start_cluster DIR PORT [SETTING...]: cluster_init, cluster_configure and cluster_start in
# one.
start_cluster() {
  local dir=$1 port=$2
  shift 2
  cluster_init "$dir" && cluster_configure "$dir" "$port" "$@" && cluster_start "$dir"
}

# remove_workdir DIR: stops every server still running anywhere under DIR (immediate: an
# interrupted run, a TAP node whose script was killed), then removes DIR.
remove_workdir() {
  local dir=$1 pid_file
  [ -d "$dir" ] || return 0
  while IFS= read -r pid_file; do
    as_postgres pg_ctl -D "$(dirname "$pid_file")" -m immediate -w stop >/dev/null 2>&1 || true
  done < <(find "$dir" -name postmaster.pid 2>/dev/null)
  # A server's last children may still be leaving its directory: try again until it is
  # gone (for 30 s at most).
  for _ in $(seq 300); do
    rm -rf "$dir" 2>/dev/null && return 0
    sleep 0.1
  done
  rm -rf "$dir"
}
