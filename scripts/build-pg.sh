#!/usr/bin/env bash
# Builds a PostgreSQL major from Debian's source package, with what the test suite needs and
# no more (plus pg_cron from the same suite), and installs it into a prefix of its own. Run
# as root on Debian 12:
#   bash scripts/build-pg.sh 17             # prints the prefix's pg_config path
#   bash scripts/build-pg.sh 18 --cassert   # with assertions (--enable-cassert: freed memory
#                                           # is overwritten, memory contexts are checked)
#
#   15: postgresql-15 from bookworm (Debian 12's own release: its packages are the default;
#       this script builds it for --cassert); 17: postgresql-17 from trixie; 18:
#       postgresql-18 from sid. Only source packages come from the newer suites: their
#       binaries would pull in a newer libc.
#   OUTBOX_PG_PREFIX   where to install (default /opt/outbox-pg<major>[-cassert])
#   PG_CRON_SOURCE     a pg_cron source tree to build instead of `apt-get source`
#                      (for a mirror that does not carry pg-cron's source)
#
# The prefix is the cache: when it holds a complete build of the same source version with
# the same flags (its stamp file says so), nothing is done. Progress goes to stderr, the
# pg_config path alone to stdout.
set -euo pipefail

usage() {
  echo "usage: bash scripts/build-pg.sh 15|17|18 [--cassert]" >&2
  exit 2
}
major=${1:-}
cassert=false
case "${2:-}" in
  "") ;;
  --cassert) cassert=true ;;
  *) usage ;;
esac
case "$major" in
  15) suite=bookworm ;;
  17) suite=trixie ;;
  18) suite=sid ;;
  *) usage ;;
esac
pg_source=postgresql-$major
# pg_cron's source package; one that builds against this major, from the same suite.
cron_source=pg-cron

flavour=pg$major
configure_flags=(--enable-debug --enable-tap-tests --without-readline --without-icu)
build_cflags="-O2"
if $cassert; then
  flavour=pg$major-cassert
  configure_flags+=(--enable-cassert)
  build_cflags="-O1"
fi
prefix=${OUTBOX_PG_PREFIX:-/opt/outbox-$flavour}
stamp="$prefix/.outbox-build-stamp"
cron_stamp="$prefix/.outbox-pg_cron-stamp"
# What the tests use, in the order of src/Makefile (ecpg, docs, the other contribs: not).
# src/bin holds pg_upgrade and pg_dump, which the upgrade test (TAP 040) runs.
build_dirs=(
  src/common src/port src/timezone src/backend src/backend/utils/mb/conversion_procs
  src/backend/snowball src/include src/interfaces/libpq
  src/backend/replication/libpqwalreceiver src/backend/replication/pgoutput src/fe_utils
  src/bin src/pl src/makefiles src/test/regress src/test/isolation src/test/perl config
  contrib/pg_stat_statements
)

# shellcheck source=scripts/apt.sh
. "$(dirname "$0")/apt.sh"
# Progress lines (scripts/progress.sh) to stderr, too.
PROGRESS_FD=2
trap progress_stop EXIT

log() { echo "build-pg: $*" >&2; }
die() {
  log "$*"
  exit 1
}
# Exit status 3: the archive cannot give the source (test/run-tests.sh and .ci/run report
# that configuration as not obtainable rather than failed).
unobtainable() {
  log "$*"
  [ -z "${work:-}" ] || rm -rf "$work"
  exit 3
}

case "$prefix" in
  /*) ;;
  *) die "OUTBOX_PG_PREFIX must be an absolute path: $prefix" ;;
esac

# --- apt: the source lines and the build dependencies -----------------------------------

# The .dsc that `apt-get source` would fetch for source package $1 from $suite's main, such
# as postgresql-15_15.18-0+deb12u1.dsc (bookworm's security suite's sources are not used).
# Run from /, where no downloaded copy makes apt print "Skipping" instead.
source_dsc() {
  (cd / && apt-get source --print-uris "$1/$suite" 2>/dev/null) |
    awk '$2 ~ /\.dsc$/ { print $2; exit }'
}

# One deb-src entry for the three suites, whichever major is built: source packages only,
# so no binary package of trixie or sid can be installed through it.
ensure_sources() {
  [ -n "$(source_dsc "$pg_source")" ] && return
  [ "$(id -u)" = 0 ] || die "run as root: apt needs a deb-src line for $suite main"
  log "apt-get update"
  apt-get update -qq
  [ -n "$(source_dsc "$pg_source")" ] && return
  local parts
  eval "$(apt-config shell parts Dir::Etc::sourceparts/d)"
  log "adding deb-src lines for bookworm, trixie and sid main (${parts%/}/outbox-debian-src.sources)"
  cat >"${parts%/}/outbox-debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm trixie sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq
  [ -n "$(source_dsc "$pg_source")" ] || unobtainable "apt finds no source package $pg_source in $suite"
}

ensure_build_deps() {
  # libipc-run-perl: configure --enable-tap-tests checks for it. bison and flex: 18's
  # tarball no longer carries the generated parsers. No readline: the tests never type.
  # scripts/apt.sh: no installed package upgraded without a word. Its lines go to stderr
  # with the rest of the progress (stdout is the pg_config path).
  apt_install build-essential dpkg-dev zlib1g-dev libipc-run-perl bzip2 xz-utils bison flex >&2
}

# --- the server -------------------------------------------------------------------------

server_stamp() {
  printf '%s\n' "source $1 (upstream tarball, Debian patches not applied)" \
    "configure ${configure_flags[*]} CFLAGS=$build_cflags" \
    "dirs ${build_dirs[*]}"
}

# Only a prefix that is empty, absent, or one of our builds may be wiped (.outbox-cassert-stamp:
# a build of this script's predecessor, build-cassert-pg.sh).
reset_prefix() {
  if [ -d "$prefix" ] && [ -n "$(ls -A "$prefix")" ] && [ ! -f "$stamp" ] &&
    [ ! -f "$prefix/.outbox-cassert-stamp" ]; then
    die "$prefix is not empty and holds no build of this script: refusing to overwrite it"
  fi
  rm -rf "$prefix"
  mkdir -p "$prefix"
}

# Debian's own patches are not applied: one of them installs libraries into
# /usr/lib/postgresql/15/lib whatever the prefix is, which would overwrite the system
# server's. This check keeps it that way.
check_paths_in_prefix() {
  local paths outside
  paths=$(sed -n 's/^#define [A-Z_]* "\(.*\)"$/\1/p' src/port/pg_config_paths.h)
  [ -n "$paths" ] || die "no install paths in src/port/pg_config_paths.h"
  outside=$(grep -v "^$prefix/" <<<"$paths" || true)
  [ -z "$outside" ] || die "install paths outside $prefix: $outside"
}

# Downloads the source package into $1, before anything is removed from the prefix.
fetch_server_source() {
  local work=$1
  (cd "$work" && apt-get source --download-only "$pg_source/$suite" >"$work/source.log" 2>&1) || {
    grep -E '^E:' "$work/source.log" | head -3 >&2
    unobtainable "the archive lists $pg_source in $suite but did not serve it (apt-get source failed)"
  }
}

build_server() {
  local dsc=$1 work=$2 jobs
  jobs=$(nproc)
  (cd "$work" && dpkg-source --skip-patches -x "$dsc" pg >/dev/null 2>&1) ||
    die "dpkg-source could not unpack $dsc"
  cd "$work/pg"
  progress_start "build-pg: configure ${configure_flags[*]} CFLAGS=$build_cflags"
  ./configure --prefix="$prefix" "${configure_flags[@]}" CFLAGS="$build_cflags" \
    CXXFLAGS="$build_cflags" >"$work/configure.log" 2>&1 ||
    die "configure failed, see $work/configure.log"
  progress_end
  make -s -C src/port pg_config_paths.h >/dev/null
  check_paths_in_prefix
  local dir
  for dir in "${build_dirs[@]}"; do
    progress_start "build-pg: make $dir"
    make -s -j"$jobs" -C "$dir" >>"$work/make.log" 2>&1 || die "make $dir failed, see $work/make.log"
    progress_end
  done
  progress_start "build-pg: make install into $prefix"
  for dir in "${build_dirs[@]}"; do
    make -s -C "$dir" install >>"$work/make.log" 2>&1 ||
      die "make -C $dir install failed, see $work/make.log"
  done
  # PGXS's Makefile.global and friends.
  make -s -C src install-local >>"$work/make.log" 2>&1
  progress_end
  cd "$work"
}

check_server() {
  local pg_config=$prefix/bin/pg_config bindir pkglibdir sharedir pgxs f
  bindir=$("$pg_config" --bindir)
  pkglibdir=$("$pg_config" --pkglibdir)
  sharedir=$("$pg_config" --sharedir)
  pgxs=$(dirname "$("$pg_config" --pgxs)")/../..
  for f in "$bindir"/{postgres,initdb,pg_ctl,psql,pg_dump,pg_restore,pg_basebackup,pg_upgrade} \
    "$pkglibdir"/{plpgsql.so,pg_stat_statements.so} \
    "$sharedir/extension/pg_stat_statements.control" \
    "$("$pg_config" --includedir-server)/postgres.h" \
    "$pgxs"/src/test/regress/pg_regress \
    "$pgxs"/src/test/isolation/{pg_isolation_regress,isolationtester} \
    "$pgxs"/src/test/perl/PostgreSQL/Test/Cluster.pm; do
    [ -e "$f" ] || die "the build lacks $f"
  done
}

# --- pg_cron, built against this server (test 001) --------------------------------------

# Prints the pg_cron source tree to build, or warns and fails when there is none.
pg_cron_source() {
  local work=$1
  if [ -n "${PG_CRON_SOURCE:-}" ]; then
    echo "$PG_CRON_SOURCE"
    return
  fi
  mkdir -p "$work/cron"
  if ! (cd "$work/cron" && apt-get source "$cron_source/$suite" >"$work/cron.log" 2>&1); then
    log "WARNING: apt-get source $cron_source/$suite failed:"
    grep -E '^E:' "$work/cron.log" | head -1 >&2
    return 1
  fi
  find "$work/cron" -mindepth 1 -maxdepth 1 -type d | head -1
}

build_pg_cron() {
  local src=$1 work=$2
  progress_start "build-pg: make pg_cron ($src)"
  # Built in a copy: a given source tree is left as it was.
  cp -a "$src" "$work/pg_cron-build"
  make -s -C "$work/pg_cron-build" -j"$(nproc)" PG_CONFIG="$prefix/bin/pg_config" \
    >"$work/pg_cron.log" 2>&1 || die "building pg_cron failed, see $work/pg_cron.log"
  make -s -C "$work/pg_cron-build" install PG_CONFIG="$prefix/bin/pg_config" \
    >>"$work/pg_cron.log" 2>&1 || die "installing pg_cron failed, see $work/pg_cron.log"
  [ -f "$("$prefix/bin/pg_config" --sharedir)/extension/pg_cron.control" ] || die "pg_cron was not installed"
  progress_end
}

pg_cron_stamp() {
  if [ -n "${PG_CRON_SOURCE:-}" ]; then
    echo "pg_cron from $PG_CRON_SOURCE"
  else
    echo "pg_cron $(source_dsc "$cron_source")"
  fi
  cat "$stamp"
}

# --- main -------------------------------------------------------------------------------

mkdir -p "$(dirname "$prefix")"
# Two runs at once (two checkouts testing) build once; the second waits.
exec 9>"$prefix.lock"
flock 9

ensure_sources
dsc=$(source_dsc "$pg_source")
wanted=$(server_stamp "$dsc")
server_ok=false
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && server_ok=true
cron_ok=false
$server_ok && [ -f "$cron_stamp" ] && [ "$(cat "$cron_stamp")" = "$(pg_cron_stamp)" ] && cron_ok=true

if ! $server_ok || ! $cron_ok; then
  [ "$(id -u)" = 0 ] || die "run as root to build into $prefix"
  ensure_build_deps
  work=$(mktemp -d "${TMPDIR:-/tmp}/outbox-$flavour-build.XXXXXX")
  chmod 755 "$work"
  started=$SECONDS
  if ! $server_ok; then
    log "building ${dsc%.dsc} into $prefix (logs in $work)"
    fetch_server_source "$work"
    reset_prefix
    build_server "$dsc" "$work"
    check_server
    echo "$wanted" >"$stamp"
    rm -f "$cron_stamp"
  fi
  if cron_src=$(pg_cron_source "$work"); then
    build_pg_cron "$cron_src" "$work"
    pg_cron_stamp >"$cron_stamp"
  elif [ -f "$cron_stamp" ]; then
    log "kept the pg_cron built before ($(head -1 "$cron_stamp"))"
  else
    log "no pg_cron in $prefix: test 001 is skipped on this server (PG_CRON_SOURCE=DIR"
    log "builds one from another copy of its source)"
  fi
  log "done in $((SECONDS - started)) s"
  rm -rf "$work"
fi

echo "$prefix/bin/pg_config"
