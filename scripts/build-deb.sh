#!/usr/bin/env bash
# Builds the Debian package postgresql-15-outbox from this checkout's files (committed or not)
# with debian/, the way apt.postgresql.org builds extensions (pg_buildext, debhelper), in a
# new temp directory. Installs the build dependencies first when some are missing. Run as
# root on Debian 12:
#   bash scripts/build-deb.sh       # prints the .deb's path; progress goes to stderr
#   apt install /tmp/outbox-deb.XXXXXX/postgresql-15-outbox_0.6.0-1_amd64.deb
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "build-deb: $*" >&2; }

export DEBIAN_FRONTEND=noninteractive
if ! command -v dpkg-checkbuilddeps >/dev/null; then
  log "installing dpkg-dev"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
fi
if ! (cd "$repo" && dpkg-checkbuilddeps) 2>/dev/null; then
  log "installing the build dependencies of debian/control"
  apt-get update -qq
  apt-get build-dep -y -qq --no-install-recommends "$repo" >/dev/null
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/outbox-deb.XXXXXX")
chmod 755 "$out" # apt reads the .deb from here as its own user
src="$out/outbox-$(cd "$repo" && dpkg-parsechangelog -S Version | sed 's/-[^-]*$//')"
mkdir "$src"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  # No build output: the files git tracks or would track (deleted ones are skipped).
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
else
  cp -a "$repo/." "$src/" # debian/rules clean removes build output
fi

log "building in $src (log: $out/build.log)"
if ! (cd "$src" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log" >&2
  log "failed, see $out/build.log"
  exit 1
fi
debs=("$out"/postgresql-*-outbox_*.deb)
[ -f "${debs[0]}" ] || { log "no .deb in $out"; exit 1; }
printf '%s\n' "${debs[@]}"
