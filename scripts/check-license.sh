#!/usr/bin/env bash
# Checks the licence files against the build (scripts/check-docs.sh runs it, so scripts/test.sh and make check do):
#   - LICENSE is the Apache License 2.0;
#   - every package of Package.resolved has a Files: paragraph (`<identity>/*`) in packaging/debian/copyright, so a
#     new dependency cannot ship unlisted, and no paragraph names a package that is not there; swift-nio's bundled llhttp is listed with its MIT licence;
#   - every licence a Files: paragraph names has a standalone License: paragraph.
# Usage: scripts/check-license.sh [PACKAGE_RESOLVED [COPYRIGHT]]  (defaults: Package.resolved, which swift build
# writes, and packaging/debian/copyright; scripts/check-deb.sh passes the copyright file a package installs)
set -euo pipefail
cd "$(dirname "$0")/.."
resolved=${1:-Package.resolved}
copyright=${2:-packaging/debian/copyright}
failures=0
fail() {
  echo "check-license: $*" >&2
  failures=$((failures + 1))
}

grep -q '^ *Apache License$' LICENSE && grep -q 'Version 2.0, January 2004' LICENSE &&
  grep -q 'END OF TERMS AND CONDITIONS' LICENSE || fail "LICENSE is not the Apache License 2.0 text"
if [ -f /usr/share/common-licenses/Apache-2.0 ]; then
  cmp -s LICENSE /usr/share/common-licenses/Apache-2.0 || fail "LICENSE differs from /usr/share/common-licenses/Apache-2.0"
fi

# The Files: fields (with their continuation lines), one pattern a line.
patterns=$(awk '/^Files:/ { files = 1; sub(/^Files:/, ""); print; next } files && /^ / { print; next } { files = 0 }' \
  "$copyright" | tr ' ' '\n' | grep -v '^$' || true)
[ -f "$resolved" ] || { echo "check-license: no $resolved (swift build or swift package resolve writes it)" >&2; exit 1; }
identities=$(grep -oE '"identity" *: *"[^"]+"' "$resolved" | sed -E 's/.*"([^"]+)"$/\1/')
[ -n "$identities" ] || fail "$resolved names no package (the scan finds nothing)"
for identity in $identities; do
  grep -qxF "$identity/*" <<<"$patterns" || fail "$copyright: no Files: paragraph for '$identity/*' (a package of $resolved)"
done
# and the other way round: a paragraph for a package no longer resolved is a stale claim of what is built (the
# toolchain's parts the static build links in are not packages of the file).
toolchain_parts="swift-stdlib swift-foundation swift-corelibs-libdispatch"
for pattern in $(grep -E '^[a-z0-9-]+/\*$' <<<"$patterns" || true); do
  grep -qxF "${pattern%/\*}" <<<"$identities" || grep -qw -- "${pattern%/\*}" <<<"$toolchain_parts" || fail "$copyright: a Files: paragraph for '$pattern', not a package of $resolved"
done
if grep -qx swift-nio <<<"$identities"; then
  awk -v RS= '/^Files: swift-nio\/Sources\/CNIOLLHTTP\/\*/ && /\nLicense: MIT/ { found = 1 } END { exit !found }' "$copyright" ||
    fail "$copyright: no MIT paragraph for swift-nio's bundled llhttp (swift-nio/Sources/CNIOLLHTTP/*)"
fi

# Every licence a Files: paragraph names has a standalone License: paragraph with its text.
while IFS= read -r name; do
  awk -v RS= -v name="$name" 'index($0, "License: " name "\n") == 1 || $0 == "License: " name { found = 1 }
    END { exit !found }' "$copyright" || fail "$copyright: no standalone 'License: $name' paragraph"
done < <(awk -v RS= '/^Files:/' "$copyright" | sed -n 's/^License: //p' | sort -u)

[ "$failures" -eq 0 ] || { echo "check-license: $failures problem(s)" >&2; exit 1; }
echo "ok: licence: LICENSE is Apache 2.0; $(wc -w <<<"$identities") packages of $resolved and llhttp listed in $copyright"
