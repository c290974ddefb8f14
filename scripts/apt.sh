# shellcheck shell=bash
# Sourced, not run: apt_install, the one way the scripts install Debian packages
# (scripts/install-deps.sh, scripts/build-pg.sh). Run as root.
#
#   apt_install PKG...    installs those of PKG that are not installed, and changes no
#                         installed package's version if apt can help it
#
# What it promises the machine's owner:
#  - An installed package keeps its version. The install is simulated first (apt-get -s);
#    when it would upgrade installed packages (postgresql-server-dev-15 pulling a newer
#    libpq5, say), it is simulated again with those packages held at their installed
#    versions (pkg=version), and the new packages of the same source at the matching
#    version (postgresql-server-dev-15 at the installed postgresql-15's). Where that
#    resolves, that is what is installed.
#  - Where it does not, it says before it starts which packages go from which version to
#    which (or are removed). OUTBOX_NO_UPGRADE=1 refuses then: nothing is installed, exit 1.
#  - No service starts: during the install, /usr/sbin/policy-rc.d answers 101 (a file of
#    the admin's is left as it is, and used). The services the new packages bring are
#    named: Debian enables them, so they start at the next boot.
#  - Packages held at their version are marked automatically installed again where they
#    were (naming a package on apt-get's command line marks it manual).
# APT_CONFIG is honoured (apt's own variable), also where dpkg is asked what is installed:
# a simulation against another dpkg status file sees that file.

# shellcheck source=scripts/progress.sh
. "$(dirname "${BASH_SOURCE[0]}")/progress.sh"

apt_say() { echo "apt: $*" >&"${PROGRESS_FD:-1}"; }

# apt_installed_versions PKG...: "PKG VERSION" for each installed PKG. dpkg's status file
# as apt sees it (Dir::State::status), so that APT_CONFIG applies here too.
apt_installed_versions() {
  local status=/var/lib/dpkg/status
  eval "$(apt-config shell status Dir::State::status/f)"
  dpkg-query --admindir="$(dirname "$status")" -W -f='${Package} ${Status} ${Version}\n' "$@" 2>/dev/null |
    awk '$4 == "installed" { print $1, $5 }' || true
}

# apt_missing PKG...: those of PKG that are not installed, one a line.
apt_missing() {
  local installed p
  installed=$(apt_installed_versions "$@" | awk '{ print $1 }')
  for p in "$@"; do
    grep -qxF "$p" <<<"$installed" || echo "$p"
  done
}

# apt_plan PKG...: simulates the install; prints one line per package it touches:
#   new PKG - NEW | change PKG OLD NEW | remove PKG OLD -
# (change: an upgrade, or a downgrade). Fails, with apt's errors on stderr, when apt finds
# no solution.
apt_plan() {
  local out
  out=$(LC_ALL=C apt-get -s install --no-install-recommends "$@" 2>&1) || {
    grep -E '^(E:| )' <<<"$out" >&2
    return 1
  }
  awk '
    $1 == "Inst" && $3 ~ /^\[/ { old = $3; gsub(/[][]/, "", old); new = $4; sub(/^\(/, "", new)
                                 print (old == new ? "same" : "change"), $2, old, new; next }
    $1 == "Inst" { new = $3; sub(/^\(/, "", new); print "new", $2, "-", new }
    $1 == "Remv" { old = $3; gsub(/[][]/, "", old); print "remove", $2, (old == "" ? "?" : old), "-" }
  ' <<<"$out"
}

# apt_pins PLAN: from a plan's lines (stdin), PKG=VERSION for each package to hold: the
# changed ones at their installed version, and new ones that come in at a changed
# package's new version at its old version instead, where the archive has it.
apt_pins() {
  local kind pkg old new
  local -A back=()
  local plan
  plan=$(cat)
  while read -r kind pkg old new; do
    [ "$kind" = change ] || continue
    echo "$pkg=$old"
    back[$new]=$old
  done <<<"$plan"
  while read -r kind pkg old new; do
    if [ "$kind" != new ] || [ -z "${back[$new]:-}" ]; then continue; fi
    if apt-cache show "$pkg=${back[$new]}" 2>/dev/null | grep -q '^Package:'; then
      echo "$pkg=${back[$new]}"
    fi
  done <<<"$plan"
}

# apt_changes PLAN: prints the plan's changes to installed packages (stdin), one a line.
apt_changes() {
  awk '$1 == "change" { printf "  %s %s -> %s\n", $2, $3, $4 }
       $1 == "remove" { printf "  %s %s -> removed\n", $2, $3 }'
}

# apt_with_no_service_starts CMD...: CMD with a policy-rc.d that forbids starting services,
# removed afterwards (also on failure or interruption). A subshell: its traps are its own.
apt_with_no_service_starts() (
  policy=/usr/sbin/policy-rc.d
  created=""
  trap '[ -z "$created" ] || rm -f "$policy"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  if [ ! -e "$policy" ]; then
    printf '%s\n' '#!/bin/sh' '# scripts/apt.sh (outbox): no service starts during its install' 'exit 101' >"$policy"
    chmod 755 "$policy"
    created=1
  fi
  "$@"
)

# apt_services PKG...: the systemd services that PKG... ship, space-separated.
apt_services() {
  local p
  for p in "$@"; do
    dpkg -L "${p%%=*}" 2>/dev/null | sed -n 's|^/lib/systemd/system/\([^/@]*\.service\)$|\1|p'
  done | sort -u | tr '\n' ' '
}

# apt_has NAME PKG=VERSION...: whether NAME is among the pins.
apt_has() {
  local name=$1 p
  shift
  for p in "$@"; do [ "${p%%=*}" = "$name" ] && return 0; done
  return 1
}

# apt_resolve PKG...: sets apt_args (what to pass to apt-get install), apt_pinned (the
# PKG=VERSION among them) and apt_final_plan, or fails when the owner refused a change.
apt_resolve() {
  local plan pinned_plan changes p
  apt_args=("$@")
  apt_pinned=()
  plan=$(apt_plan "$@") || { apt_say "apt finds no way to install $* (above)"; return 1; }
  apt_final_plan=$plan
  changes=$(apt_changes <<<"$plan")
  [ -n "$changes" ] || return 0
  mapfile -t apt_pinned < <(apt_pins <<<"$plan")
  apt_args=()
  for p in "$@"; do
    apt_has "$p" "${apt_pinned[@]}" || apt_args+=("$p")
  done
  apt_args+=("${apt_pinned[@]}")
  if pinned_plan=$(apt_plan "${apt_args[@]}" 2>/dev/null) &&
    [ -z "$(apt_changes <<<"$pinned_plan")" ]; then
    apt_say "held at the installed versions, so that no installed package is upgraded: ${apt_pinned[*]}"
    apt_final_plan=$pinned_plan
    return 0
  fi
  apt_say "installing $* changes installed packages (apt finds no way around it):"
  echo "$changes" >&"${PROGRESS_FD:-1}"
  if [ "${OUTBOX_NO_UPGRADE:-}" = 1 ]; then
    apt_say "OUTBOX_NO_UPGRADE=1: refused; nothing was installed. Install the packages yourself,"
    apt_say "or run again without OUTBOX_NO_UPGRADE to let apt make the changes above."
    return 1
  fi
  apt_say "going ahead (OUTBOX_NO_UPGRADE=1 refuses instead)"
  apt_args=("$@")
  apt_pinned=()
}

# apt_to_mark_auto REQUESTED...: the pinned packages not asked for that were automatically
# installed, or not installed at all, before (run before the install).
apt_to_mark_auto() {
  local auto p name
  auto=$(apt-mark showauto 2>/dev/null)
  for p in "${apt_pinned[@]}"; do
    name=${p%%=*}
    printf '%s\n' "$@" | grep -qxF -- "$name" && continue
    if grep -qxF -- "$name" <<<"$auto" || [ -z "$(apt_installed_versions "$name")" ]; then
      echo "$name"
    fi
  done
}

apt_install() {
  local missing=() remark=() new=() log services rc=0
  mapfile -t missing < <(apt_missing "$@")
  [ ${#missing[@]} -gt 0 ] || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt_say "to install: ${missing[*]}"
  local n=${#missing[@]}
  progress_start "apt: $n package$([ "$n" -eq 1 ] || echo s) and what $([ "$n" -eq 1 ] && echo it needs || echo they need)"
  apt-get update -qq || rc=$?
  [ $rc -eq 0 ] && { apt_resolve "${missing[@]}" || rc=$?; }
  [ $rc -eq 0 ] || { progress_end "$rc"; return "$rc"; }
  mapfile -t remark < <(apt_to_mark_auto "$@")
  log=$(mktemp)
  apt_with_no_service_starts apt-get install -y -q --no-install-recommends "${apt_args[@]}" \
    >"$log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || tail -n 30 "$log"
  rm -f "$log"
  if [ $rc -eq 0 ]; then
    [ ${#remark[@]} -eq 0 ] || apt-mark auto "${remark[@]}" >/dev/null
    mapfile -t new < <(awk '$1 == "new" { print $2 }' <<<"$apt_final_plan")
    services=$(apt_services "${new[@]}")
    [ -z "$services" ] ||
      apt_say "not started: ${services}(Debian enables them: they start at the next boot)"
  fi
  progress_end "$rc"
  return "$rc"
}
