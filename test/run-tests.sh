#!/usr/bin/env bash
# Runs every outbox test: unit tests (plain C++, no server), pg_regress, the isolation
# tester, and the TAP suites. Installs what is missing first. Run as root on Debian 12:
#   bash test/run-tests.sh                  # against PG_CONFIG's PostgreSQL (default: Debian's 15)
#   bash test/run-tests.sh --pg 18          # against PostgreSQL 18 (or 15), built once from
#                                           # Debian's source package (scripts/build-pg.sh)
#   bash test/run-tests.sh --cassert        # ... built with assertions (--pg 18 --cassert too)
#   bash test/run-tests.sh --pg all         # every configuration CI runs, one after the other:
#                                           # 15, 15 --cassert, 18 --cassert
# Exit status 3: the configuration's PostgreSQL cannot be built, because Debian's archive
# does not serve its source (scripts/build-pg.sh); --pg all and .ci/run report it as not
# tested, without failing. That is always so for --pg 17 (trixie's postgresql-17: the
# archive lists it and serves none of its files), which is therefore in neither.
# What it installs: scripts/install-deps.sh --tests (the packages), and outbox (make
# install) into PG_CONFIG's PostgreSQL. The test-only modules it installs there too (the
# example sink, the crashing sink, the guard test module) are removed when it ends, also
# when a suite fails or the run is interrupted. Each phase prints a line when it starts,
# every 25 s while it runs (scripts/progress.sh), and its time when it ends.
# It wraps the make targets (docs/install.md): `make install` into PG_CONFIG's PostgreSQL,
# `make installcheck` against a throwaway cluster (the postgres user runs it, in a temp
# directory that user owns), `make prove_installcheck` as the postgres user in a copy of the
# tests in that directory (the checkout itself may not be readable by it). On a major other
# than 15, the extension is also installed into 15 built with assertions, the source of the
# upgrade tests (TAP 040: pg_upgrade; 021: pg_dump restored into the new major).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1

usage() {
  echo "usage: bash test/run-tests.sh [--pg 15|18|all] [--cassert]" >&2
  exit 2
}
major=
cassert=false
while [ $# -gt 0 ]; do
  case "$1" in
    --cassert) cassert=true ;;
    --pg)
      [ $# -ge 2 ] || usage
      major=$2
      shift
      ;;
    *) usage ;;
  esac
  shift
done

if [ "$major" = all ]; then
  $cassert && usage
  # Each configuration in a run of its own; the summary gives each one's result and time.
  results=()
  rc=0
  for config in "15" "15 --cassert" "18 --cassert"; do
    echo "=== run-tests: --pg $config"
    started=$SECONDS
    # shellcheck disable=SC2086 # $config is two words on purpose
    bash "$0" --pg $config
    status=$?
    case $status in
      0) results+=("passed in $((SECONDS - started)) s: --pg $config") ;;
      3) results+=("NOT TESTED (its source cannot be had): --pg $config") ;;
      *)
        results+=("FAILED (exit $status) in $((SECONDS - started)) s: --pg $config")
        rc=1
        ;;
    esac
  done
  echo
  echo "run-tests --pg all:"
  printf '  %s\n' "${results[@]}"
  exit $rc
fi
case "$major" in
  "" | 15 | 17 | 18) ;;
  *) usage ;;
esac

# shellcheck source=scripts/progress.sh
. scripts/progress.sh
# The test-only modules (installed below into PG_CONFIG's PostgreSQL; removed at the end):
# the example sink (TAP 032), the sink that crashes on request (034), the module that
# throws inside guard() (043).
test_modules=(outbox_sink_file.so outbox_sink_crashtest.so outbox_guard_test.so)
test_pkglibdir=""
work=""
cleanup() {
  progress_stop
  # An interrupted run (or a TAP script killed before its END block stops its nodes) can
  # leave servers running in $work: remove_workdir stops them before removing it.
  [ -z "$work" ] || remove_workdir "$work"
  [ -z "$test_pkglibdir" ] || (cd "$test_pkglibdir" && rm -f "${test_modules[@]}")
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash scripts/install-deps.sh --tests || exit 1
# Debian's 15 by default (or PG_CONFIG's); every other configuration is a build of its own.
if $cassert || [ "${major:-15}" != 15 ]; then
  build_options=()
  $cassert && build_options+=(--cassert)
  [ -n "${PG_CONFIG:-}" ] && echo "=== (PG_CONFIG=$PG_CONFIG is not used: --pg and --cassert pick the server)"
  PG_CONFIG=$(bash scripts/build-pg.sh "${major:-15}" "${build_options[@]}")
  status=$?
  if [ $status -eq 3 ]; then
    echo "=== NOT TESTED: PostgreSQL ${major:-15}'s source cannot be had from the archive (above)"
    exit 3
  fi
  [ $status -eq 0 ] || exit 1
  export PG_CONFIG
fi
. scripts/pg-env.sh || exit 1
echo "=== PostgreSQL: $("$PG_CONFIG" --version) ($PG_CONFIG)"
server_major=$("$PG_CONFIG" --version | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
if [ -n "$major" ] && [ "$server_major" != "$major" ]; then
  echo "$PG_CONFIG is PostgreSQL $server_major, not $major" >&2
  exit 1
fi
# pg15, pg18-cassert, ...: names the output directory and the summary.
flavour=pg$server_major
"$PG_CONFIG" --configure | grep -q -- --enable-cassert && flavour=$flavour-cassert

progress_run "build: outbox, its sinks, the Kafka mock" \
  make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" all test-tools || exit 1
make -s install PG_CONFIG="$PG_CONFIG" >/dev/null || exit 1
# From here on, the EXIT trap removes the test-only modules from this directory.
test_pkglibdir=$("$PG_CONFIG" --pkglibdir)
# The example sink (test/t/032_example_sink.pl): built out of tree against the header just
# installed, as a third party would. The sink that crashes on request
# (test/t/034_sink_isolation.pl). The module that throws inside guard()
# (test/t/043_guard_exceptions.pl).
install_test_modules() {
  make -s -C examples/sink PG_CONFIG="$PG_CONFIG" clean install >/dev/null &&
    make -s -C test/unit outbox_sink_crashtest.so &&
    install -m 755 test/unit/outbox_sink_crashtest.so "$test_pkglibdir/" &&
    make -s -C test/modules/guard PG_CONFIG="$PG_CONFIG" clean install >/dev/null
}
progress_run "build: the test-only modules (${test_modules[*]})" install_test_modules || exit 1

# The source of the upgrades from 15 (TAP 040 and 021), on another major: PostgreSQL 15 as
# released (Debian 12's source package, built with assertions as for --cassert), with this
# outbox. Not Debian's 15.20 binary package: it stores an attribute option on every column
# (pg_attver) that 18.6 refuses, so pg_upgrade from it fails on any table
# (docs/operations.md, "Upgrading PostgreSQL").
install_upgrade_source() {
  local pg_config
  pg_config=$(bash scripts/build-pg.sh 15 --cassert) &&
    bash scripts/install-into.sh "$pg_config" &&
    OUTBOX_UPGRADE_FROM=$(dirname "$("$pg_config" --bindir)")
}
if [ "$server_major" != 15 ]; then
  progress_start "PostgreSQL 15 with outbox, the source of the upgrade tests (TAP 021, 040)"
  install_upgrade_source || exit 1
  progress_end
  export OUTBOX_UPGRADE_FROM
fi

passed=0
failed=0
failed_names=()
suite() {
  local name=$1
  shift
  progress_start "$name"
  if "$@"; then
    passed=$((passed + 1))
    progress_finish "passed"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    progress_finish "FAILED"
  fi
}

work=$(make_workdir)
# A copy the postgres user can read and write, for make prove_installcheck: the Makefile, the
# tests and the Kafka mock built above, and what the tests read: the documents whose
# snippets test/t/026_readme_snippets.pl runs, the client examples test/t/024_examples.pl runs.
cp -a "$repo/Makefile" "$repo/src" "$repo/test" "$repo/README.md" "$repo/docs" "$repo/examples" \
  "$repo/monitoring" "$work/"
[ "$(id -u)" = 0 ] && chown -R postgres: "$work"

# Keeps a failed suite's output in test/output/<configuration>/ (pg15, pg18-cassert, ...)
# for a look after the run.
output=test/output/$flavour
# keep_output NAME PATH...: copies the paths into test/output/NAME.
keep_output() {
  local name=$1
  shift
  rm -rf "${repo:?}/$output/$name"
  mkdir -p "$repo/$output/$name"
  cp -a "$@" "$repo/$output/$name/" 2>/dev/null
  echo "(output kept in $output/$name)"
}

regress_tests=$(sed -n 's/^REGRESS = //p' Makefile)

# make installcheck's server: a throwaway cluster in $work. The fixed port only names the
# Unix socket: it listens on no TCP address and keeps its socket in $work, so two runs at
# once (two checkouts) do not collide.
start_installcheck_cluster() {
  start_cluster "$work" 54401 "listen_addresses = ''"
}

# make installcheck in the checkout, as the caller: pg_regress alone (ISOLATION=) or the
# isolation tests alone (REGRESS=).
installcheck() {
  PGHOST=$work PGPORT=54401 PGUSER=postgres make -s installcheck PG_CONFIG="$PG_CONFIG" "$@"
}

run_regress() {
  installcheck ISOLATION=
  local rc=$?
  [ $rc -ne 0 ] && keep_output regress_out results regression.out regression.diffs &&
    head -300 regression.diffs
  return $rc
}

run_isolation() {
  installcheck REGRESS=
  local rc=$?
  [ $rc -ne 0 ] && keep_output isolation_out test/isolation/output &&
    head -300 test/isolation/output/regression.diffs
  return $rc
}

# On a failure the failed tests' own logs come last, so that the tail of the run (all a CI
# summary may show) names them: each server log's last lines, then the test's log (the
# failed assertions), then prove's summary of the failures.
run_tap() {
  (cd "$work" && as_postgres make -s prove_installcheck PG_CONFIG="$PG_CONFIG" PROVE_FLAGS=--timer) 2>&1 |
    tee "$work/prove.out"
  local rc=${PIPESTATUS[0]}
  [ $rc -eq 0 ] && return 0
  keep_output tmp_check "$work/tmp_check" "$work/prove.out"
  local failed name f t
  failed=$(sed -n 's/^\(test\/t\/[^ ]*\.pl\) *(Wstat.*/\1/p' "$work/prove.out")
  for t in $failed; do
    name=$(basename "$t" .pl)
    for f in "$work"/tmp_check/log/"${name}"_*.log; do
      [ -f "$f" ] || continue
      echo "--- $f (last 40 lines)"
      tail -n 40 "$f"
    done
    f=$work/tmp_check/log/regress_log_$name
    echo "--- $f: its failed checks"
    grep -n -B2 -A6 -E '^not ok|Failed test|died|Dubious|timed out| at [^ ]+ line [0-9]+' "$f" | tail -n 60
  done
  echo "--- tap: prove's summary"
  sed -n '/^Test Summary Report/,$p' "$work/prove.out"
  return $rc
}

# Every pg_regress test in test/sql/ must be listed in the Makefile's REGRESS, or it would
# silently never run. test/sql/ holds only tests: the install and update scripts sit beside
# outbox.control, where the Makefile's DATA takes them from.
check_schedule() {
  local missing=0 t
  for f in test/sql/*.sql; do
    t=$(basename "$f" .sql)
    case "$t" in outbox--*)
      echo "test/sql/$t.sql: install and update scripts belong beside outbox.control (it would not be installed)"
      missing=1
      continue
      ;;
    esac
    if ! grep -qw "$t" <<<"$regress_tests"; then
      echo "test/sql/$t.sql is not in REGRESS in the Makefile"
      missing=1
    fi
  done
  return $missing
}

# Every install and update script starts with the same schema guard (docs/security.md): a
# copy that drifted would let one script through where the others refuse. The reference is
# the install script of the control file's default_version, the one script a fresh
# install runs.
check_script_guards() {
  local version install reference rc=0 f
  version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" outbox.control)
  install=outbox--$version.sql
  [ -f "$install" ] || { echo "no $install for default_version '$version' in outbox.control"; return 1; }
  reference=$(sed -n '/^DO \$guard\$$/,/^\$guard\$;$/p' "$install")
  [ -n "$reference" ] || { echo "no guard block in $install"; return 1; }
  for f in outbox--*.sql; do
    if [ "$(sed -n '/^DO \$guard\$$/,/^\$guard\$;$/p' "$f")" != "$reference" ]; then
      echo "$f: its schema guard differs from $install's (or is missing)"
      rc=1
    fi
  done
  return $rc
}

# The servers' logs: a failed assertion (TRAP, in an assert-enabled build), a crash, or a
# complaint about memory or leaked resources, in a background worker say, fails no test by
# itself (the postmaster restarts the process). A signal 9 is a test's own kill -9.
check_server_logs() {
  local pattern='TRAP: |terminated by signal ([^9]|[0-9][0-9])|PANIC: |problem in alloc set|write past chunk end|reference leak|refcount leak|file leak|memory leak|was not closed|snapshot .* still active'
  local logs=() found
  mapfile -t logs < <(find "$work/server.log" "$work/tmp_check/log" -name '*.log' \
    ! -name 'regress_log_*' 2>/dev/null)
  [ ${#logs[@]} -gt 0 ] || { echo "no server logs found"; return 1; }
  found=$(grep -HEn "$pattern" "${logs[@]}")
  [ -z "$found" ] && return 0
  echo "$found" | head -50
  mkdir -p "$repo/$output/server-logs"
  cut -d: -f1 <<<"$found" | sort -u | xargs -d '\n' cp -t "$repo/$output/server-logs/"
  echo "(logs kept in $output/server-logs)"
  return 1
}

suite "schedule" check_schedule
suite "script guards" check_script_guards
suite "versions" bash test/versions.sh
suite "unit tests" make -s -j"$(nproc)" unit-tests PG_CONFIG="$PG_CONFIG"
suite "format" make -s format-check
suite "alert rules" bash test/monitoring.sh
if start_installcheck_cluster; then
  suite "pg_regress" run_regress
  suite "isolation" run_isolation
  cluster_stop "$work"
else
  echo "the installcheck cluster did not start:"
  tail -n 30 "$work/server.log"
  suite "pg_regress" false
  suite "isolation" false
fi
suite "tap" run_tap
suite "server logs" check_server_logs

echo
echo "suites on $flavour: ${passed} passed, ${failed} failed${failed_names:+ (${failed_names[*]})}"
[ "$failed" -eq 0 ]
