# shellcheck shell=bash
# Sourced, not run: progress lines for the long phases of scripts/demo.sh,
# scripts/install-deps.sh, scripts/build-pg.sh and test/run-tests.sh, so that work is told
# from a hang. A phase prints a line when it starts, "still running" every 25 s while it
# runs, and its time when it ends:
#   progress_start "build"        # === build
#   ...                           # === build: still running (25 s)
#   progress_end                  # === build: done in 61 s   (progress_end RC: FAILED, if RC != 0;
#                                 # progress_finish WORDS: "=== build: WORDS in 61 s")
#   progress_run "build" make     # the three in one; returns the command's status
# One phase at a time. The script's EXIT trap calls progress_stop, which stops the ticker
# (the background loop that prints "still running") if a phase is still open; the ticker
# also ends by itself within a second of its script's exit, should the trap not run.
# PROGRESS_FD: the file descriptor the lines go to (default 1; build-pg.sh uses 2).

progress_phase=""
progress_started=0
progress_ticker=""
progress_owner=""

progress_say() { echo "=== $*" >&"${PROGRESS_FD:-1}"; }

# The ticker: a subshell that checks every second that the script ($$, the top-level
# shell) still runs, and prints every 25 s.
progress_tick() {
  local phase=$1 started=$2 owner=$3 n=0
  while kill -0 "$owner" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if [ $((n % 25)) -eq 0 ]; then
      progress_say "$phase: still running ($((SECONDS - started)) s)"
    fi
  done
}

progress_start() {
  progress_stop
  progress_phase=$1
  progress_started=$SECONDS
  progress_owner=$BASHPID
  progress_say "$progress_phase"
  progress_tick "$progress_phase" "$progress_started" "$$" &
  progress_ticker=$!
}

# progress_stop_ticker: stops the ticker, if one runs. SIGKILL: the ticker runs no trap of
# its own, not even the script's EXIT trap, which a just-forked subshell may still hold.
progress_stop_ticker() {
  [ -n "$progress_ticker" ] || return 0
  kill -KILL "$progress_ticker" 2>/dev/null || true
  wait "$progress_ticker" 2>/dev/null || true
  progress_ticker=""
}

# progress_end [RC]: ends the phase; RC other than 0 reports it failed.
progress_end() {
  if [ "${1:-0}" -eq 0 ]; then
    progress_finish "done"
  else
    progress_finish "FAILED (exit $1)"
  fi
}

# progress_finish WORDS: ends the phase with "=== PHASE: WORDS in N s".
progress_finish() {
  progress_stop_ticker
  [ -n "$progress_phase" ] || return 0
  progress_say "$progress_phase: $* in $((SECONDS - progress_started)) s"
  progress_phase=""
}

# progress_stop: for EXIT traps; ends a phase left open (the script failed or was
# interrupted in it). Never fails. Only the shell that started the phase acts.
progress_stop() {
  [ -z "$progress_owner" ] || [ "$progress_owner" = "$BASHPID" ] || return 0
  progress_stop_ticker
  [ -n "$progress_phase" ] || return 0
  progress_say "$progress_phase: stopped after $((SECONDS - progress_started)) s"
  progress_phase=""
}

# progress_run PHASE CMD...: CMD as a phase; returns its status. CMD runs as the left side
# of ||, so a shell function given as CMD runs without set -e: give it commands, or
# functions that check their own steps.
progress_run() {
  progress_start "$1"
  shift
  local rc=0
  "$@" || rc=$?
  progress_end "$rc"
  return "$rc"
}
