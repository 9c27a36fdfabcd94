#!/usr/bin/env bash
# Checks a built replenish-agent .deb without installing it: its file list and modes, its control fields,
# that its Depends cover every shared library the binary needs, and lintian (errors fail; warnings are
# printed). Usage: scripts/check-deb.sh .build/deb/replenish-agent_<version>_<arch>.deb
set -euo pipefail
deb=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v lintian >/dev/null || { echo "installing lintian"; apt-get install -y -qq lintian >/dev/null; }

contents=$(dpkg-deb -c "$deb")
for entry in "-rwxr-xr-x root/root .* ./usr/bin/replenish-agent" \
  "-rw-r--r-- root/root .* ./lib/systemd/system/replenish-agent.service" \
  "-rw-r--r-- root/root .* ./lib/udev/rules.d/99-replenish-agent-gpio.rules" \
  "-rw-r--r-- root/root .* ./usr/share/replenish-agent/board/raspberry-pi-4b.json" \
  "-rw-r--r-- root/root .* ./usr/share/replenish-agent/agent.example.json" \
  "-rw-r----- root/root .* ./etc/replenish-agent/agent.json" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/copyright" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/changelog.gz"; do
  grep -qE -- "^$entry\$" <<<"$contents" || fail "$deb lacks: $entry"
done
[[ "$(dpkg-deb -f "$deb" Package)" == replenish-agent ]] || fail "Package field"
[[ "$(dpkg-deb -f "$deb" Architecture)" == "$(dpkg --print-architecture)" ]] || fail "Architecture field"
[[ "$(dpkg-deb -I "$deb" conffiles)" == /etc/replenish-agent/agent.json ]] || fail "conffiles"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
names=$(sed 's/([^)]*)//g; s/[,|]/\n/g; s/ //g' <<<"$depends")

# Every library the binary needs belongs to a package named in Depends.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch"
ldd "$scratch/usr/bin/replenish-agent" | grep -iE 'swift|Foundation|icu|dispatch' && fail "the binary needs the Swift runtime"
# The packages Depends pulls in, recursively (computed once).
# shellcheck disable=SC2086
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
  --no-enhances $names 2>/dev/null | sed -nE 's/^ *(Pre)?Depends: <?([^:>]+).*/\2/p; s/^([a-z0-9][^ :]*)$/\1/p' |
  sort -u >"$scratch/closure"
for library in $(ldd "$scratch/usr/bin/replenish-agent" | awk '/=>/ { print $3 }'); do
  owner=$(dpkg -S "$(readlink -f "$library")" 2>/dev/null | head -n 1 | cut -d: -f1) ||
    owner=$(dpkg -S "$library" 2>/dev/null | head -n 1 | cut -d: -f1)
  [[ -n "$owner" ]] || fail "no package owns $library"
  # A library is covered when its package is a dependency, or one of them pulls it in (libcurl4 → libssl3 …).
  grep -qxF "$owner" <<<"$names" || grep -qxF "$owner" "$scratch/closure" ||
    fail "$library ($owner) is needed but not in Depends"
done
echo "ok: every shared library of the binary is covered by Depends"

echo "== lintian $(lintian --version | awk '{print $2}')"
report=$(lintian --tag-display-limit 0 "$deb" 2>&1 || true)
echo "$report"
if grep -q '^E: ' <<<"$report"; then fail "lintian reports errors"; fi
echo "ok: lintian reports no errors ($(grep -c '^W: ' <<<"$report" || true) warnings)"
