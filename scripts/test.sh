#!/usr/bin/env bash
# The project's test command (README, CI): every check, in stages, and at the end (on failure too) a table of
# the stages with their wall times. docs/testing.md, "The whole run", says what each stage proves.
#
# The run is laid out for a 2-core machine, whose two cores are the limit. Each configuration is compiled once:
# the tests' debug build (.build), the package's release build (.build-deb; vm-test's v1 binary is that build,
# its v2 binary the same objects linked again against libgpiod 2.x), the arm64 release build of the device
# binary (.build-arm64) and the arm64 debug build of the test bundle and the VM's emulator (.build-arm64-tests).
# Downloads and images are made in the background from the start; the arm64 builds, the arm64 device's boots and
# the unit suites under qemu-aarch64 run in the background as soon as what each needs is there, so their waits
# and the host's (VM idle minutes, the power cut, the watchdog) overlap compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt.sh
. scripts/stages.sh
. scripts/check.sh
logs=.build/logs
mkdir -p "$logs"
stage_begin "scripts/test.sh"

# Every Debian package any step installs on the host, before anything builds or runs in the background: apt
# allows one installer at a time, and a package installed between two builds can replace a system header,
# which makes the next build compile every C target and every Swift module above them again. The steps
# still check their own (an installed package is not installed again), so each script also works alone.
host_packages=( # beside scripts/install-deps.sh --tests (the build's and the tests' packages)
  dpkg-dev binutils file lintian strace jq                                         # the package, its checks, syscalls
  qemu-system-x86 busybox-static cpio kmod xz-utils make gcc libc6-dev e2fsprogs   # vm-test, vm-boot-test
  mmdebstrap arch-test qemu-user-static binfmt-support qemu-system-arm binutils-aarch64-linux-gnu # arm64
  postgresql                                                                       # the maker's cloud's suites
)
host_packages_and_kernel_headers() {
  scripts/install-deps.sh --tests && apt_install "${host_packages[@]}" && bash scripts/vm-test.sh packages
}
stage "Debian packages for every step (apt; the VM kernel's headers)" host_packages_and_kernel_headers
# The commit and version the binaries report, written once before anything builds in the background (every
# build script runs it again and finds it current).
bash scripts/build-info.sh

# Downloads, chroots and images, in the background while the host compiles: the amd64 VMs' kernel, gpio-sim
# module, libgpiod 2.x, booted image and the package's chroot; the arm64 toolchain (a sid chroot with Debian's
# Swift, the aarch64 runtime, the trixie sysroot), trixie's kernel, gpio-sim module and booted image.
prepare_amd64="prepare amd64: VM kernel, gpio-sim, libgpiod 2.x, bookworm image, package chroot"
stage_bg "$prepare_amd64" "$logs/prepare-amd64.log" -- bash -c 'bash scripts/vm-test.sh prepare && bash scripts/vm-boot-test.sh amd64 rootfs-only &&
    bash scripts/deb-chroot-test.sh --prepare'
arm64_toolchain="prepare arm64: the toolchain (sid chroot with Debian's Swift, aarch64 runtime, trixie sysroot)"
arm64_image="prepare arm64: trixie kernel, gpio-sim, trixie image and lintian (package scripts under qemu-aarch64)"
stage_bg "$arm64_toolchain" "$logs/prepare-arm64-toolchain.log" -- bash scripts/arm64.sh toolchain
stage_bg "$arm64_image" "$logs/prepare-arm64-image.log" -- bash scripts/vm-boot-test.sh arm64 rootfs-only

# The arm64 side runs in the background from here, each stage as soon as what it needs is there: the release
# build and the debug build (test bundle, the VM's emulator) as soon as the toolchain is, beside the host's
# compiles (a release build compiles each module whole, and modules that depend on each other one at a time, so
# a core is often idle); the arm64 device boots and the unit suites run under qemu-aarch64 beside the host's
# VMs, which wait for most of their time (idle minutes, the power cut, the watchdog).
arm64_package="arm64: release build of the device binary and its package (make deb ARCH=arm64)"
arm64_debug="arm64: debug build of the test bundle and the VM's emulator (scripts/arm64.sh build-tests)"
arm64_test="arm64: the unit suites under qemu-aarch64 (scripts/arm64.sh test)"
arm64_boot="arm64: package checks and trixie's lintian, then the booted arm64 device (scripts/vm-boot-test.sh arm64)"
stage_bg "$arm64_package" "$logs/arm64-package.log" --after "$arm64_toolchain" -- env ARCH=arm64 bash scripts/deb.sh
stage_bg "$arm64_debug" "$logs/arm64-debug.log" --after "$arm64_toolchain" -- bash scripts/arm64.sh build-tests
stage_bg "$arm64_test" "$logs/arm64-test.log" --after "$arm64_debug" -- bash scripts/arm64.sh test
# shellcheck disable=SC2016 # expanded by the stage's own shell, once the package exists
stage_bg "$arm64_boot" "$logs/arm64-boot.log" --after "$arm64_package" "$arm64_debug" "$arm64_image" -- bash -c '
  deb=$(ls -t .build/deb/replenish-agent_*_arm64.deb | head -n 1)
  bash scripts/check-deb.sh "$deb" && VM_BOOT_DEB=$deb bash scripts/vm-boot-test.sh arm64'

# The package's release build, in the background once the tests' build is done (its man page and completions
# come from that build), then the amd64 device booted beside the host's other VM checks once the package and the
# image are there.
host_package="Debian package (scripts/deb.sh: release build, static Swift standard library)"
amd64_boot="booted amd64 device: bookworm, systemd, the .deb, gpio-sim (scripts/vm-boot-test.sh)"
start_host_package() {
  stage_bg "$host_package" "$logs/host-package.log" -- bash scripts/deb.sh
  # shellcheck disable=SC2016 # expanded by the stage's own shell, once the package exists
  stage_bg "$amd64_boot" "$logs/amd64-boot.log" --after "$host_package" "$prepare_amd64" -- bash -c '
    VM_BOOT_DEB=$(ls -t .build/deb/replenish-agent_*_"$(dpkg --print-architecture)".deb | head -n 1) bash scripts/vm-boot-test.sh'
}

# The contributor's loop (make check): format lint, debug build without warnings, every Swift suite, docs. The
# tests' build weighs as a background stage (check.sh, build_without_warnings): in the foreground it took the
# whole 2-core machine for its first 3 minutes, and the arm64 toolchain's restore, where the run's longest path
# (the arm64 builds, then the arm64 device) begins, took 313 s for 41 s of CPU. It is on that path too: its debug
# agent writes both packages' man page and completions (deb.sh).
REPLENISH_TESTS_BUILD_NICE=$(background_nice)
export REPLENISH_TESTS_BUILD_NICE
check_stages start_host_package

# The tests' build links the Swift libraries dynamically, so its ldd shows which the agent needs (the release
# build has the same dependencies); the package's binary has them linked in, so its symbols are looked at below.
no_foundation_linked() {
  local binary
  binary="$(swift build --scratch-path "$(tests_scratch)" --show-bin-path)/replenish-agent"
  if ldd "$binary" | grep -iE 'libFoundation\.so|FoundationNetworking|FoundationInternationalization|FoundationXML|icu'; then
    echo "FAIL: $binary links Foundation or ICU" >&2
    return 1
  fi
  echo "ok: $(ldd "$binary" | wc -l) shared libraries, none of them Foundation or ICU"
}
stage "device binary: no Foundation, no ICU (ldd)" no_foundation_linked

unit_exposure() {
  local exposure
  exposure=$(systemd-analyze security --offline=true config/replenish-agent.service 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
  if [[ -z "$exposure" ]] || ! awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
    echo "FAIL: config/replenish-agent.service exposure ${exposure:-unreadable}, above 2.0" >&2
    return 1
  fi
  echo "ok: exposure $exposure"
}
stage "systemd unit: systemd-analyze security --offline=true rates it 2.0 or lower" unit_exposure

stage_wait "$host_package"
deb=$(ls -t .build/deb/replenish-agent_*_"$(dpkg --print-architecture)".deb | head -n 1)

# Swift mangles a symbol of module Foundation as $s10Foundation…, FoundationInternationalization as $s30…; ICU's
# own are _FoundationICU's and its data icudt….
packaged_symbols() {
  local packaged symbols own foreign
  packaged="$(swift build -c release --static-swift-stdlib --scratch-path "$(readlink -f .build-deb)" --show-bin-path)/replenish-agent"
  symbols=$(nm "$packaged") || { echo "FAIL: nm could not read $packaged" >&2; return 1; }
  own=$(grep -c '\$s14ReplenishAgent' <<<"$symbols" || true)
  foreign=$(grep -cE '\$s10Foundation|\$s30FoundationInternationalization|_FoundationICU|icudt' <<<"$symbols" || true)
  if [ "$own" -eq 0 ] || [ "$foreign" -ne 0 ]; then
    echo "FAIL: $packaged: $own symbols of the agent's own module, $foreign of Foundation or ICU" >&2
    return 1
  fi
  echo "ok: the packaged binary has $own symbols of the agent's module and none of Foundation or ICU"
}
stage "packaged binary: the agent's symbols, none of Foundation or ICU (nm)" packaged_symbols
stage "package checks and lintian (scripts/check-deb.sh, amd64)" bash scripts/check-deb.sh "$deb"
stage "system calls of the packaged agent against SystemCallFilter= (scripts/syscalls.sh)" bash scripts/syscalls.sh
stage_wait "$prepare_amd64"
stage "install, upgrade, remove, purge in a bookworm chroot (scripts/deb-chroot-test.sh)" \
  bash scripts/deb-chroot-test.sh "$deb"
stage "docs/production.md's factory commands as written, in a bookworm chroot (scripts/factory-check.sh)" \
  bash scripts/factory-check.sh "$deb"
stage "real-kernel GPIO, libgpiod v1 and v2 (scripts/vm-test.sh all)" bash scripts/vm-test.sh all
stage_wait "$amd64_boot"
# The maker's cloud (cloud/, a package of its own): built once, here, where the amd64 device has left a core
# idle beside the arm64 device; its suites on a PostgreSQL server of their own, and Amazon's schema on every
# message they saw the service write.
stage "the maker's cloud: build, suites on PostgreSQL, Amazon's Alexa schema (scripts/cloud-test.sh)" \
  bash scripts/cloud-test.sh

stage_wait "$arm64_toolchain"
stage_wait "$arm64_image"
stage_wait "$arm64_package"
stage_wait "$arm64_debug"
stage_wait "$arm64_test"
stage_wait "$arm64_boot"
