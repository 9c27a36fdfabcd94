#!/usr/bin/env bash
# The project's test command (README, CI): unit and integration tests, then the device binary's check:
# the release `replenish-agent` must not link Foundation or ICU.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt.sh
scripts/install-deps.sh --tests
# What the arm64 steps need from the host, installed now, before anything runs in the background (apt allows
# one installer at a time).
arm64_host_packages=(mmdebstrap arch-test qemu-user-static binfmt-support qemu-system-arm e2fsprogs xz-utils kmod
  binutils-aarch64-linux-gnu dpkg-dev lintian file)
apt_install "${arm64_host_packages[@]}"
echo "== swift format lint --strict (the checked-in .swift-format)"
swift format lint --strict --recursive Sources Tests Package.swift
# No compiler warning in the project's own code (issue #22: repeated warnings buried real failures): the build's
# output is kept and any `warning:` in Sources/ or Tests/ fails the run (CI builds a clean clone, so every file is
# compiled and every warning printed; an up-to-date local build prints none).
build_log=$(mktemp)
if ! swift build --build-tests >"$build_log" 2>&1; then
  cat "$build_log"
  rm -f "$build_log"
  exit 1
fi
grep -vE '^\[[0-9]+/[0-9]+\]' "$build_log" | tail -n 3
# The project's files by their folder, not by $PWD (the compiler prints the real path, which differs from $PWD
# under a symlink); the packages' checkouts under .build*/ are not the project's.
if grep -E "/(Sources|Tests)/[^:]*:[0-9]+:[0-9]+: warning:" "$build_log" | grep -vE "/\.build[^/]*/" | sort -u | grep .; then
  rm -f "$build_log"
  echo "FAIL: the build printed the compiler warnings above" >&2
  exit 1
fi
rm -f "$build_log"
swift test
echo "== docs: links, subcommands in code blocks, benchmark figures and their commands (scripts/check-docs.sh)"
bash scripts/check-docs.sh
# The arm64 toolchain (a sid chroot, the aarch64 runtime, the trixie sysroot) and the booted arm64 image's root
# file system are mostly downloads and package scripts run under qemu-aarch64: they are made in the background
# while the host's package and VM steps run, and waited for before the arm64 steps. (Not during `swift test`:
# some manual-clock tests bound their settling in real time, and one failed once with this running beside it.)
mkdir -p .build
arm64_prepare_log=.build/arm64-prepare.log
echo "== arm64: preparing the toolchain and the device image in the background ($arm64_prepare_log)"
(bash scripts/arm64.sh toolchain && bash scripts/vm-boot-test.sh arm64 rootfs-only) >"$arm64_prepare_log" 2>&1 &
arm64_prepare=$!
# The tests' build links the Swift libraries dynamically, so its ldd shows which the agent needs (the release
# build has the same dependencies); the package's binary has them linked in, so its symbols are looked at below.
echo "== device binary: no Foundation, no ICU"
binary="$(swift build --show-bin-path)/replenish-agent"
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
deb=$(ls -t .build/deb/replenish-agent_*_"$(dpkg --print-architecture)".deb | head -n 1)
# Swift mangles a symbol of module Foundation as $s10Foundation…, FoundationInternationalization as $s30…; ICU's
# own are _FoundationICU's and its data icudt….
packaged="$(swift build -c release --static-swift-stdlib --scratch-path .build-deb --show-bin-path)/replenish-agent"
symbols=$(nm "$packaged") || { echo "FAIL: nm could not read $packaged" >&2; exit 1; }
own=$(grep -c '\$s14ReplenishAgent' <<<"$symbols" || true)
foreign=$(grep -cE '\$s10Foundation|\$s30FoundationInternationalization|_FoundationICU|icudt' <<<"$symbols" || true)
if [ "$own" -eq 0 ] || [ "$foreign" -ne 0 ]; then
  echo "FAIL: $packaged: $own symbols of the agent's own module, $foreign of Foundation or ICU" >&2
  exit 1
fi
echo "ok: the packaged binary has $own symbols of the agent's module and none of Foundation or ICU"
bash scripts/check-deb.sh "$deb"
echo "== the packaged agent's system calls (strace over the demo flow) against the unit's SystemCallFilter="
bash scripts/syscalls.sh
echo "== Debian package: install, upgrade, remove, purge in a bookworm chroot (scripts/deb-chroot-test.sh)"
bash scripts/deb-chroot-test.sh "$deb"
echo "== real-kernel GPIO: the agent on a gpio-sim chip in a QEMU VM, libgpiod v1 and v2 (scripts/vm-test.sh)"
bash scripts/vm-test.sh all
echo "== the device booted: Debian bookworm image, systemd, the .deb, gpio-sim, emulator in a QEMU VM (scripts/vm-boot-test.sh)"
VM_BOOT_DEB=$deb bash scripts/vm-boot-test.sh
echo "== arm64: waiting for the background preparation"
if ! wait "$arm64_prepare"; then
  tail -n 40 "$arm64_prepare_log"
  echo "FAIL: the arm64 preparation failed (log: $arm64_prepare_log)" >&2
  exit 1
fi
grep -E '^== ' "$arm64_prepare_log" || true
echo "== arm64: the device binary cross-built with Debian's Swift 6.2.3 for trixie (make arm64, scripts/arm64.sh)"
bash scripts/arm64.sh build
echo "== arm64: the unit suites under qemu-aarch64 (scripts/arm64.sh test)"
bash scripts/arm64.sh test
echo "== arm64: Debian package (make deb ARCH=arm64), then its checks and lintian"
ARCH=arm64 bash scripts/deb.sh
deb_arm64=$(ls -t .build/deb/replenish-agent_*_arm64.deb | head -n 1)
bash scripts/check-deb.sh "$deb_arm64"
echo "== arm64: the device booted: Debian trixie arm64, its kernel, systemd, the arm64 .deb, gpio-sim (scripts/vm-boot-test.sh arm64)"
VM_BOOT_DEB=$deb_arm64 bash scripts/vm-boot-test.sh arm64
