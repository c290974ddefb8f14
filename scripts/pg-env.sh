# Sourced by the scripts that start throwaway PostgreSQL clusters. Tests and demos run the
# server as the postgres user (it refuses to run as root), in a temp directory it owns.
PG_BINDIR=$(pg_config --bindir)
export PG_BINDIR
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
