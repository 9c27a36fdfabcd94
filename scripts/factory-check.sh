#!/usr/bin/env bash
# The factory's commands as docs/production.md writes them: every fenced block after a `<!-- factory-check: run -->`
# line, in the page's order, run as written in one shell on a scratch root: a bookworm chroot (the tarball
# scripts/deb-chroot-test.sh makes) with the package installed and a maker's production config (serial from
# /etc/replenish-agent/serial, the setup key in /etc/replenish-agent/setup-key). `sudo` there is the identity (the
# chroot's shell is root already); the scanner's line (`read`) is the label the blocks printed. It fails when a
# block fails, when the blocks print no label of this unit, or when the label check passes another unit's label.
# Usage (root): scripts/factory-check.sh [.build/deb/replenish-agent_<version>_<arch>.deb]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "factory-check: needs root (chroot): run it as root" >&2; exit 1; }
  exec sudo --preserve-env=PATH,HOME bash "$0" "$@"
fi
deb=${1:-$(ls -t .build/deb/replenish-agent_*.deb | head -n 1)}
bash scripts/deb-chroot-test.sh --prepare
tarball=$(ls -t .build/deb-chroot-*.tar | head -n 1)
root=$(mktemp -d /tmp/replenish-factory.XXXXXX)
trap 'rm -rf "$root"' EXIT
tar -C "$root" -xf "$tarball"
fail() { echo "FACTORY FAIL $*" >&2; exit 1; }

# The blocks, as the page has them.
awk '/^<!-- factory-check: run -->$/ { armed = 1; next }
     armed && /^```sh$/ { inside = 1; next }
     inside && /^```$/ { inside = 0; armed = 0; print ""; next }
     inside { print }' docs/production.md >"$root/tmp/factory.sh"
blocks=$(grep -c '^<!-- factory-check: run -->$' docs/production.md)
[ "$blocks" -ge 2 ] || fail "docs/production.md has $blocks blocks marked <!-- factory-check: run --> (expected the factory's and the ready-to-box check)"
echo "factory-check: $blocks blocks of docs/production.md, $(grep -cv '^$' "$root/tmp/factory.sh") lines"

# The package, and what the maker puts in the image: the production config, with serialFile instead of serial.
cp "$deb" "$root/tmp/agent.deb"
chroot "$root" dpkg -i /tmp/agent.deb >/dev/null
sed -e 's/"serial": "REPLACEWITHUNITSERIAL"/"serialFile": "\/etc\/replenish-agent\/serial"/' \
  -e 's/REPLACE-WITH-YOUR-DRS-DEVICE-MODEL-ID/5f4f1c5e-1234-4abc-8def-0123456789ab/' \
  -e 's/REPLACE-WITH-YOUR-LWA-CLIENT-ID/amzn1.application-oa2-client.factorycheck/' \
  -e '/REPLACE-WITH-YOUR-LWA-CLIENT-SECRET/d' \
  -e 's/REPLACE-WITH-THE-SLOT-ID-FROM-THE-DRS-CONSOLE/0b4f6c1e-1234-4abc-8def-0123456789ab/' \
  config/agent.example.json >"$root/etc/replenish-agent/agent.json"
grep -q serialFile "$root/etc/replenish-agent/agent.json" || fail "the example config's serial line changed: update this script"
printf '#!/bin/sh\nexec "$@"\n' >"$root/usr/local/bin/sudo" && chmod 755 "$root/usr/local/bin/sudo"

# The blocks in one shell, in a folder of the line's machine, with /proc for the agent's arguments. The scanner
# types the label that the first block printed, once it is there (bounded: 60 s).
scanner() {
  for _ in $(seq 600); do
    for file in "$root"/root/label-*.txt; do [ -s "$file" ] && { head -n 1 "$file"; return; }; done
    sleep 0.1
  done
}
out=$(mktemp)
if ! scanner | unshare --mount --fork sh -c \
  'mount -t proc proc "$0/proc" && exec chroot "$0" sh -c "cd /root && exec bash -euo pipefail /tmp/factory.sh"' \
  "$root" >"$out" 2>&1; then
  cat "$out"
  fail "a factory block of docs/production.md failed (its output above)"
fi
label_file=$(ls "$root"/root/label-*.txt 2>/dev/null | head -n 1)
[ -n "$label_file" ] || { cat "$out"; fail "the blocks printed no label-<serial>.txt"; }
label=$(head -n 1 "$label_file")
[[ "$label" == RPL1:SN000123:* ]] || fail "the label's first line is not this unit's QR text"
grep -q "label matches this unit (serial SN000123)" "$out" || { cat "$out"; fail "the ready-to-box check did not pass this unit's own label"; }
# Another unit's label must fail the check.
other="RPL1:SN000124:${label##*:}"
if unshare --mount --fork sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" replenish-agent label --check "$1"' \
  "$root" "$other" >/dev/null 2>&1; then
  fail "label --check passed another unit's label"
fi
echo "FACTORY PASS: docs/production.md's factory blocks ran as written; the unit's own label passed the check, another's did not"
