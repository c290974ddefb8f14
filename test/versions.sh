#!/usr/bin/env bash
# The tested PostgreSQL majors are stated once, as PG_MAJORS in the Makefile. This checks that
# the other places that name them agree, so that they cannot drift apart again:
#   outbox.control   its first comment names them ("PostgreSQL 15 and 18")
#   META.json        the description names them; the PostgreSQL range starts at the lowest and
#                    ends before the one after the highest; a major inside the range that is
#                    not tested is named in the description with "not tested"
#   README.md, docs/install.md
#                    name them ("PostgreSQL 15 and 18"); every sentence that names another
#                    major as a PostgreSQL version says "not tested"
#   debian/pgversions
#                    one major (the package's, Debian 12's), one of them; debian/control's
#                    package is postgresql-<it>-outbox
#   .ci/run          its configurations test exactly them (Debian's 15 by default, --pg N);
#                    its comments name no other major but as "not tested"
#   bash test/versions.sh    # exit 0, or 1 with one line per disagreement
set -uo pipefail
cd "$(dirname "$0")/.."
failures=0
fail() {
  echo "versions: $*" >&2
  failures=$((failures + 1))
}

majors=$(sed -n 's/^PG_MAJORS *= *//p' Makefile)
if ! [[ $majors =~ ^[0-9]+( [0-9]+)*$ ]]; then
  echo "versions: the Makefile has no PG_MAJORS = N N ... line (found: '$majors')" >&2
  exit 1
fi
read -ra list <<<"$majors"
lowest=${list[0]}
highest=${list[-1]}
# "15 and 18", "15, 17 and 18": as the docs write them.
phrase=${list[-1]}
if [ ${#list[@]} -gt 1 ]; then
  phrase="$(IFS=,; echo "${list[*]:0:${#list[@]}-1}" | sed 's/,/, /g') and ${list[-1]}"
fi
tested() { [[ " $majors " == *" $1 "* ]]; }
# The majors that exist around them and are not tested: 10 up to two past the highest.
untested=()
for ((m = 10; m <= highest + 2; m++)); do tested $m || untested+=("$m"); done

# untested_claims FILE: the sentences of FILE that name an untested major as a PostgreSQL
# version and do not say "not tested". A sentence ends at ". ", ";", a blank line, a list
# item or a table row; wrapped lines are joined.
untested_claims() {
  UNTESTED="${untested[*]}" perl -0777 -ne '
    my @majors = split " ", $ENV{UNTESTED};
    s/\n(?=\s*(?:[-*|#]|\d+\.)\s)/\n\n/g;                 # list items, table rows, headings
    for my $sentence (split /(?<=[.;])\s+|\n\s*\n|\|/) {
      (my $one = $sentence) =~ s/\s+/ /g;
      next if $one =~ /not tested|untested/i;
      for my $m (@majors) {
        # $m as a major: "PostgreSQL 17", "postgresql-17", "--pg 17", "on 17", "15, 17",
        # "17 and 18", "17.12", "17:" (a list of majors)
        if ($one =~ /(?:PostgreSQL|postgresql-|--pg|\bpg|\bmajors?|\bon|\bto|\bfrom)\s*$m\b(?!\s*(?:ms|%|s\b|writers|min))/i
            || $one =~ /\b1\d(?:,| and| or) $m\b(?![.\d])/ || $one =~ /(?<![.\d-])\b$m(?:,| and| or) 1\d\b(?![.\d])/
            || $one =~ /(?<![.\d-])\b$m\.\d+\b(?!\.)/ && $one =~ /PostgreSQL|Debian|major/) {
          print "$m: $one\n";
          last;
        }
      }
    }' "$1"
}

check_doc() {
  local file=$1 claims
  grep -q "PostgreSQL $phrase\b" "$file" ||
    fail "$file does not name the tested majors as 'PostgreSQL $phrase' (Makefile PG_MAJORS = $majors)"
  claims=$(untested_claims "$file")
  [ -z "$claims" ] || while IFS= read -r line; do
    fail "$file names a major that is not tested (PG_MAJORS = $majors) without saying 'not tested': $line"
  done <<<"$claims"
}

# outbox.control
control_comment=$(head -1 outbox.control)
[[ $control_comment == "#"*"PostgreSQL $phrase"* ]] ||
  fail "outbox.control's first line does not name 'PostgreSQL $phrase': $control_comment"
for m in $(grep -oE '\b1[0-9]\b' <<<"$control_comment"); do
  tested "$m" || fail "outbox.control's first line names $m, not tested: $control_comment"
done

# META.json
description=$(sed -n 's/^ *"description": *"\(.*\)",*$/\1/p' META.json)
range=$(sed -n 's/^ *"PostgreSQL": *"\(.*\)",*$/\1/p' META.json)
[[ $description == *"PostgreSQL $phrase"* ]] ||
  fail "META.json's description does not name 'PostgreSQL $phrase'"
if [[ $range =~ ^\>=\ ([0-9]+)\.[0-9]+\.[0-9]+,\ \<\ ([0-9]+)\.0\.0$ ]]; then
  from=${BASH_REMATCH[1]} to=${BASH_REMATCH[2]}
  [ "$from" = "$lowest" ] || fail "META.json's PostgreSQL range '$range' starts at $from, not $lowest"
  [ "$to" = $((highest + 1)) ] || fail "META.json's PostgreSQL range '$range' ends at $to, not $((highest + 1))"
  for ((m = from; m < to; m++)); do
    tested $m && continue
    [[ $description =~ (^|[^0-9])$m([^0-9].*)?not\ tested ]] ||
      fail "META.json's range '$range' includes $m, which its description does not call 'not tested'"
  done
else
  fail "META.json's PostgreSQL prereq is not of the form '>= X.Y.Z, < N.0.0': '$range'"
fi

check_doc README.md
check_doc docs/install.md

# debian/pgversions: the package is for one major, Debian 12's.
package_majors=$(grep -vE '^\s*(#|$)' debian/pgversions)
if ! [[ $package_majors =~ ^[0-9]+$ ]]; then
  fail "debian/pgversions should hold one major (the package's, Debian 12's), holds: $(echo $package_majors)"
else
  tested "$package_majors" || fail "debian/pgversions names $package_majors, not tested (PG_MAJORS = $majors)"
  grep -q "^Package: postgresql-$package_majors-outbox$" debian/control ||
    fail "debian/control's package is not postgresql-$package_majors-outbox (debian/pgversions)"
  grep -q "postgresql-$package_majors-outbox" docs/install.md ||
    fail "docs/install.md does not name the package postgresql-$package_majors-outbox"
fi

# .ci/run: the configurations it runs (tests bash test/run-tests.sh: Debian's 15; --pg N).
ci_majors=$(grep -E '^\s*tests bash test/run-tests.sh' .ci/run | sed -E 's/.*run-tests\.sh//' |
  while read -r args; do
    if [[ $args =~ --pg\ ([0-9]+) ]]; then echo "${BASH_REMATCH[1]}"; else echo 15; fi
  done | sort -nu | tr '\n' ' ')
[ "${ci_majors% }" = "$(tr ' ' '\n' <<<"$majors" | sort -nu | tr '\n' ' ' | sed 's/ $//')" ] ||
  fail ".ci/run's configurations test the majors '${ci_majors% }', not PG_MAJORS = $majors"
claims=$(untested_claims <(grep '^#' .ci/run | sed 's/^# \{0,1\}//'))
[ -z "$claims" ] || while IFS= read -r line; do
  fail ".ci/run's comments name a major that is not tested without saying 'not tested': $line"
done <<<"$claims"

if [ $failures -gt 0 ]; then
  echo "versions: $failures disagreement(s) with PG_MAJORS = $majors (Makefile)" >&2
  exit 1
fi
echo "versions: outbox.control, META.json, README.md, docs/install.md, debian/pgversions and .ci/run agree with PG_MAJORS = $majors"
