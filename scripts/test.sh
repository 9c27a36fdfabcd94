#!/usr/bin/env bash
# The project's test command (README, CI): unit and integration tests, then the device binary's check:
# the release `replenish-agent` must not link Foundation or ICU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== swift format lint --strict (the checked-in .swift-format)"
swift format lint --strict --recursive Sources Tests Package.swift
swift build --build-tests
swift test
echo "== release device binary: no Foundation, no ICU"
swift build -c release --product replenish-agent 2>&1 | tail -n 1
binary="$(swift build -c release --show-bin-path)/replenish-agent"
if ldd "$binary" | grep -iE 'libFoundation\.so|FoundationNetworking|FoundationInternationalization|FoundationXML|icu'; then
  echo "FAIL: $binary links Foundation or ICU" >&2
  exit 1
fi
echo "ok: $(ldd "$binary" | wc -l) shared libraries, none of them Foundation or ICU"
echo "== systemd unit: systemd-analyze security --offline=true must rate it 2.0 or lower"
exposure=$(systemd-analyze security --offline=true config/replenish-agent.service 2>&1 |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [[ -z "$exposure" ]] || ! awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
  echo "FAIL: config/replenish-agent.service exposure ${exposure:-unreadable}, above 2.0" >&2
  exit 1
fi
echo "ok: exposure $exposure"
echo "== Debian package: make deb, then lintian (no errors allowed)"
bash scripts/deb.sh
deb=$(ls -t .build/deb/replenish-agent_*.deb | head -n 1)
bash scripts/check-deb.sh "$deb"
echo "== the packaged agent's system calls (strace over the demo flow) against the unit's SystemCallFilter="
bash scripts/syscalls.sh
echo "== Debian package: install, upgrade, remove, purge in a bookworm chroot (scripts/deb-chroot-test.sh)"
bash scripts/deb-chroot-test.sh "$deb"
echo "== real-kernel GPIO: the agent on a gpio-sim chip in a QEMU VM, libgpiod v1 and v2 (scripts/vm-test.sh)"
bash scripts/vm-test.sh all
echo "== the device booted: Debian bookworm image, systemd, the .deb, gpio-sim, emulator in a QEMU VM (scripts/vm-boot-test.sh)"
bash scripts/vm-boot-test.sh
