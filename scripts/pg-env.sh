# Sourced by the scripts that start throwaway PostgreSQL clusters. Tests and demos run the
# server as the postgres user (it refuses to run as root), in a temp directory it owns.
# PG_CONFIG picks the PostgreSQL installation: pg_config on PATH (Debian's) by default.
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

# start_cluster DIR PORT [CONF_LINE...]: initdb and start a throwaway cluster in DIR
# (a make_workdir directory), on loopback and a Unix socket in DIR only.
start_cluster() {
  local dir=$1 port=$2
  shift 2
  as_postgres initdb -D "$dir/data" -A trust -U postgres --encoding=UTF8 --no-locale >/dev/null
  {
    echo "listen_addresses = '127.0.0.1'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir'"
    for line in "$@"; do echo "$line"; done
  } >>"$dir/data/postgresql.conf"
  as_postgres pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

# stop_cluster DIR: stop it (fast) if it runs.
stop_cluster() {
  as_postgres pg_ctl -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}
