#!/usr/bin/env bash
# The device's life, tested by booting it: a real Debian bookworm root file system (mmdebstrap, systemd as PID
# 1) on a virtio disk under QEMU (TCG, no network), with the out-of-tree gpio-sim chip, the agent's .deb
# installed with dpkg, the emulator of LWA/DRS on the VM's loopback, and a test runner unit
# (scripts/vm/boot/runner.sh) that prints `VM-TEST PASS name` / `VM-TEST FAIL name: why` on the console.
#
#   scripts/vm-boot-test.sh            the amd64 device: Debian bookworm, qemu-system-x86_64
#   scripts/vm-boot-test.sh arm64      the arm64 device: Debian trixie arm64 with its own kernel, qemu-system-aarch64
#                                      (-M virt, a Cortex-A72 as on a Raspberry Pi 4), the .deb of
#                                      `make deb ARCH=arm64` and the emulator built for arm64 (scripts/arm64.sh)
#
# Two boots of the same disk: the first pairs, presses, then cuts the power (sysrq `o`, no sync, no shutdown)
# while an order's answer is unknown; the second, its wall clock restored to the first's last time and with
# systemd-timesyncd masked (nothing synchronises the clock), checks that the order is not sent twice and that
# a new press orders, upgrades the package, measures the agent idle, checks a press with the runtime directory
# unusable (unknown-boot), runs the bench's C floor beside it (bench/c-agent.c, built for the image: both
# footprints end the output as one table), and tests the watchdog, `systemctl stop`, `apt remove` and `apt
# purge`. docs/testing.md ("The booted devices") describes each check.
#
# Cached under .build/vm/: the root file system (rootfs-<key>, keyed by the package list, the kernel ABI and
# this script's image recipe; a change makes a new one and the old one is deleted), the gpio-sim module
# (scripts/vm/common.sh). Per run: .build/vm/boot/ (the disk image, the packages, console logs
# console-boot1.log and console-boot2.log).
# The package: `make deb` (scripts/deb.sh), or $VM_BOOT_DEB. The emulator: the tests' debug build (.build, or
# .build-arm64-tests for arm64), with the Swift runtime's libraries in the image.
# Needs root (mmdebstrap --mode=root, chroot for dpkg -i into the image). Exit 0 only if every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
arch=${1:-amd64}
vm=$root/.build/vm
tag=vm-boot-test
[ "$arch" = amd64 ] || tag=vm-boot-test-$arch
. scripts/vm/common.sh
if [ "$(id -u)" -ne 0 ]; then # mmdebstrap --mode=root and chroot need root: again through sudo
  command -v sudo >/dev/null 2>&1 || die "needs root (mmdebstrap --mode=root, chroot): run it as root"
  exec sudo --preserve-env=PATH,HOME,VM_BOOT_DEB,VM_BOOT_TIMEOUT,VM_SMP,REPLENISH_TEST_CACHE bash "$0" "$@"
fi
boot_timeout=${VM_BOOT_TIMEOUT:-900} # seconds for one boot, power-on to power-off
# One emulated CPU per device: the test command runs both devices beside the builds on a two-core machine, where
# a second vCPU's thread mostly waits for the first (a guest lock held by a vCPU the host has put aside is spun
# on by the other) and doubles the threads competing for the cores. VM_SMP=2 gives a device two.
smp=${VM_SMP:-1}
mirror=http://deb.debian.org/debian

# What the device image holds: systemd and udev, the agent's runtime libraries, the kernel with Debian's own
# initramfs (virtio_blk and ext4 are modules), and the tools the runner uses.
# avahi-daemon and avahi-utils: the pairing window's DNS-SD service, browsed with avahi-browse (over the loopback
# interface, the VM having no network: vm-test-lo-multicast.service); iproute2 for that unit's `ip`.
# network-manager (with wpasupplicant), polkitd (the package's rule lets the agent's user ask NetworkManager; trixie's
# NetworkManager does not depend on it), hostapd, dnsmasq-base and iw: the Wi-Fi setup on simulated radios
# (mac80211_hwsim, a module of both kernels): NetworkManager runs the device's access point and its join, hostapd
# and dnsmasq the "home" network, wpa_supplicant the "phone" (runner.sh's wifi-setup).
# nginx-light: mutual TLS in front of the emulator's maker's cloud for the second agent, of program alexa
# (runner.sh's alexa-press and alexa-power-cut).
packages=(systemd-sysv udev dbus kmod initramfs-tools init-system-helpers openssl adduser curl jq procps
  avahi-daemon avahi-utils libavahi-client3 iproute2 network-manager wpasupplicant polkitd hostapd dnsmasq-base iw
  nginx-light)
case "$arch" in
amd64)
  work=$vm/boot
  release=bookworm
  suites=("deb $mirror bookworm main" "deb $mirror bookworm-updates main"
    "deb http://deb.debian.org/debian-security bookworm-security main")
  packages+=(libcurl4 libgpiod2 libssl3 ca-certificates) # libgpiod 1.6 (the v1 API)
  qemu=(qemu-system-x86_64 -accel tcg -cpu max)
  serial=ttyS0
  vm_host_packages mmdebstrap e2fsprogs
  vm_prepare_gpio_sim
  ;;
arm64)
  work=$vm/boot-arm64
  release=trixie
  suites=("deb $mirror trixie main")
  # libgpiod 2.x (the v2 API), as trixie ships it. No ca-certificates: the test speaks plain HTTP on loopback,
  # and its postinst (a shell loop over every certificate) would run emulated.
  packages+=(libcurl4t64 libgpiod3 libssl3t64)
  # -cpu cortex-a72: a Raspberry Pi 4's core, and TCG need not emulate pointer authentication (-cpu max).
  qemu=(qemu-system-aarch64 -M virt -cpu cortex-a72)
  serial=ttyAMA0
  # arch-test: mmdebstrap refuses a foreign-architecture root without it (only a Recommends of mmdebstrap,
  # which apt_install leaves out).
  need_packages qemu-system-arm qemu-user-static binfmt-support mmdebstrap arch-test e2fsprogs xz-utils
  # The image's packages run their scripts under qemu-aarch64 (binfmt_misc), while it is made.
  [ -e /proc/sys/fs/binfmt_misc/status ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 >/dev/null
  . scripts/vm/arm64.sh
  vm_arm64_prepare
  ;;
*) die "usage: scripts/vm-boot-test.sh [amd64|arm64] [rootfs-only]" ;;
esac
packages+=("linux-image-$kver")

# --- the root file system ---------------------------------------------------------------------------------
recipe() {
  printf '%s\n' "$arch" "${packages[@]}" "${suites[@]}"
  declare -f customize essential
}
# customize DIR: run by mmdebstrap in the new tree (no network needed later): masks what a test VM does not
# need and that would only cost TCG time.
customize() {
  echo vmboot >"$1/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 vmboot\n' >"$1/etc/hosts"
  printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$1/etc/fstab"
  chroot "$1" systemctl mask serial-getty@ttyS0.service serial-getty@ttyAMA0.service getty@tty1.service \
    apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
    systemd-timesyncd.service dpkg-db-backup.timer systemd-hwdb-update.service \
    NetworkManager-wait-online.service >/dev/null 2>&1
  # The hardware database is not needed by a VM with virtio devices (essential: not built).
  rm -f "$1/usr/bin/systemd-hwdb"
  chroot "$1" dpkg-divert --quiet --local --rename --remove /usr/bin/systemd-hwdb
  rm -rf "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*_Packages
}
# essential DIR: run by mmdebstrap before the other packages are installed. The kernel's initramfs gets the
# modules that find the root disk (virtio, ext4) and no others (MODULES=list: no hardware to detect in a
# chroot), compressed fast; and `systemd-hwdb update` (udev's postinst) does nothing. Both cost minutes when
# the arm64 image's scripts run under qemu-aarch64.
essential() {
  chroot "$1" dpkg-divert --quiet --local --rename --add /usr/bin/systemd-hwdb
  ln -s /bin/true "$1/usr/bin/systemd-hwdb"
  mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks"
  printf '%s\n' MODULES=list COMPRESS=gzip COMPRESSLEVEL=1 >"$1/etc/initramfs-tools/conf.d/vm-boot-test.conf"
  printf '%s\n' '#!/bin/sh' '[ "$1" = prereqs ] && exit 0' '. /usr/share/initramfs-tools/hook-functions' \
    'manual_add_modules virtio_blk virtio_pci virtio_mmio ext4' >"$1/etc/initramfs-tools/hooks/vm-boot-test"
  chmod 0755 "$1/etc/initramfs-tools/hooks/vm-boot-test"
}
key=$(recipe | sha256sum | cut -c1-16)
rootfs=$vm/rootfs-$arch-$key
# Not here yet: the cache outside the clone (scripts/cache.sh) may have it, keyed by the recipe and the suites'
# state in the archive.
cache_key=""
if [ ! -s "$rootfs/boot/vmlinuz-$kver" ]; then
  cache_key=$(cache_key "$(recipe) $kver" "${suites[@]}") || cache_key=""
  rm -rf "$rootfs"
  cache_restore "rootfs-$arch" "$cache_key" "$rootfs" || true
fi
if [ ! -s "$rootfs/boot/vmlinuz-$kver" ]; then
  step "root file system: mmdebstrap $release $arch (${#packages[@]} packages and their dependencies)"
  rm -rf "$vm"/rootfs-"$arch"-* # older recipes
  mkdir -p "$vm"
  log=$vm/mmdebstrap-$arch.log
  mmdebstrap --mode=root --variant=minbase --format=directory --architectures="$arch" \
    --aptopt='Acquire::Check-Valid-Until "false"' --include="$(
      IFS=,
      echo "${packages[*]}"
    )" \
    --essential-hook="$(declare -f essential); essential \"\$1\"" \
    --customize-hook="$(declare -f customize); customize \"\$1\"" \
    "$release" "$rootfs.tmp" "${suites[@]}" >"$log" 2>&1 ||
    { tail -n 40 "$log"; die "mmdebstrap failed (log: ${log#"$root"/})"; }
  [ -s "$rootfs.tmp/boot/initrd.img-$kver" ] || die "no initrd.img-$kver in the new root file system"
  mv "$rootfs.tmp" "$rootfs"
  echo "$tag: root file system $(du -sm "$rootfs" | cut -f1) MB"
  cache_store "rootfs-$arch" "$cache_key" "$rootfs"
fi
[ "${2:-}" = rootfs-only ] && exit 0

# --- the binaries and the packages ------------------------------------------------------------------------
# The agent comes in its package, with the Swift standard library linked in (the image has no Swift). The
# emulator is the tests' debug build (it serves one device), with the Swift runtime's libraries beside it in the
# image: a release build with the standard library linked in would compile every module again (about 4 min).
mkdir -p "$work"
build_log=$work/build.log
if [ "$arch" = amd64 ]; then
  # `--build-tests`, as the tests' build is made (scripts/check.sh): a build of one product leaves out
  # -enable-testing, which made SwiftPM compile SwiftNIO and the emulator again (3 minutes of both cores in a
  # clean-clone run) for binaries the tests' build already has. Up to date, it compiles nothing.
  step "building replenish-emulator and replenish-companion (debug, the tests' build: swift build --build-tests)"
  tests=$(. scripts/cache.sh && tests_scratch)
  swift build --build-tests --scratch-path "$tests" >>"$build_log" 2>&1 || { tail -n 40 "$build_log"; die "swift build failed"; }
  emulator=$(swift build --scratch-path "$tests" --show-bin-path)/replenish-emulator
  companion=$(swift build --scratch-path "$tests" --show-bin-path)/replenish-companion
  emulator_libraries=$(swift -print-target-info | sed -n '/"runtimeLibraryPaths"/,/]/p' | grep -o '"/[^"]*"' | tr -d '"' | head -n 1)
  [ -f "$emulator_libraries/libswiftCore.so" ] || die "no Swift runtime libraries at '$emulator_libraries' (swift -print-target-info)"
else
  # The emulator of the arm64 debug build (scripts/arm64.sh build-tests, beside the test bundle), with the Swift
  # runtime's libraries beside it in the image (that build links them dynamically; the agent's package does not).
  step "building replenish-emulator for arm64 (scripts/arm64.sh build-tests)"
  bash scripts/arm64.sh build-tests >"$build_log" 2>&1 || { tail -n 40 "$build_log"; die "scripts/arm64.sh failed"; }
  emulator=$root/.build-arm64-tests/aarch64-unknown-linux-gnu/debug/replenish-emulator
  companion=$root/.build-arm64-tests/aarch64-unknown-linux-gnu/debug/replenish-companion
  emulator_libraries=$(bash scripts/arm64.sh runtime-libraries)
fi
tail -n 1 "$build_log"
# The bench's C floor (bench/c-agent.c), which runs beside the agent in boot 2 (runner.sh's c-floor), built
# against the image's libcurl and libgpiod: on amd64 with this machine's, as the amd64 package is (the image is
# Debian bookworm, as the machine the package is built on must be); on arm64 against the trixie sysroot.
c_floor_log=$work/c-floor-build.log
if [ "$arch" = amd64 ]; then
  c_agent=$work/c-agent
  cc -O2 -Wall -s -o "$c_agent" bench/c-agent.c -lcurl -lgpiod >"$c_floor_log" 2>&1 ||
    { tail -n 20 "$c_floor_log"; die "building bench/c-agent.c failed"; }
else
  step "building the C floor for arm64 (scripts/arm64.sh c-floor)"
  bash scripts/arm64.sh c-floor >"$c_floor_log" 2>&1 || { tail -n 20 "$c_floor_log"; die "scripts/arm64.sh c-floor failed"; }
  c_agent=$root/.build-arm64/c-agent
fi
rm -rf "$work/debs" && mkdir -p "$work/debs"
if [ -n "${VM_BOOT_DEB:-}" ]; then
  deb=$VM_BOOT_DEB
else
  step "make deb ARCH=$arch (scripts/deb.sh)"
  ARCH=$arch DEB_SCRATCH=$root/.build-deb bash scripts/deb.sh >"$work/deb.log" 2>&1 ||
    { tail -n 30 "$work/deb.log"; die "scripts/deb.sh failed"; }
  deb=$(ls -t "$root"/.build/deb/replenish-agent_*_"$arch".deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || die "scripts/deb.sh made no .build/deb/replenish-agent_*_$arch.deb"
fi
[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || die "$deb is not for $arch"
cp "$deb" "$work/debs/new.deb"
version=$(dpkg-deb -f "$work/debs/new.deb" Version)
# The releases before this one, in the unit's local APT repository (runner.sh's upgrade and rollback): the same
# package under lower versions.
# - 0~older, the build boot 1 runs and boot 2 upgrades from, in the layout of the releases before this one:
#   agent.json a dpkg conffile, and its shipped example unlike this release's (no pairing.setupKeyFile line, as
#   before the setup key), so that a conffile in the new package would stop the upgrade at dpkg's prompt.
# - 0~earliest, two releases back: this package as it is (this layout, this prerm); its rollback is refused.
rm -rf "$work/debs/older" && dpkg-deb -R "$work/debs/new.deb" "$work/debs/older"
sed -i 's/^Version: .*/Version: 0~older/' "$work/debs/older/DEBIAN/control"
sed -e 's/"windowMinutes": 10,/"windowMinutes": 10/' -e '/"setupKeyFile"/d' config/agent.example.json >"$work/debs/older-example.json"
cmp -s "$work/debs/older-example.json" config/agent.example.json && die "the older build's example equals this one's"
install -D -m 0640 "$work/debs/older-example.json" "$work/debs/older/etc/replenish-agent/agent.json"
install -m 0644 "$work/debs/older-example.json" "$work/debs/older/usr/share/replenish-agent/agent.example.json"
echo /etc/replenish-agent/agent.json >"$work/debs/older/DEBIAN/conffiles"
(cd "$work/debs/older" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) \
  >"$work/debs/older/DEBIAN/md5sums"
# gzip -1, not dpkg-deb's xz: test fixtures, and xz of the 17 MB binary took minutes of a loaded machine.
dpkg-deb --root-owner-group -Zgzip -z1 -b "$work/debs/older" "$work/debs/older.deb" >/dev/null
rm -rf "$work/debs/older" "$work/debs/older-example.json"
rm -rf "$work/debs/earliest" && dpkg-deb -R "$work/debs/new.deb" "$work/debs/earliest"
sed -i 's/^Version: .*/Version: 0~earliest/' "$work/debs/earliest/DEBIAN/control"
dpkg-deb --root-owner-group -Zgzip -z1 -b "$work/debs/earliest" "$work/debs/earliest.deb" >/dev/null
rm -rf "$work/debs/earliest"
command -v dpkg-scanpackages >/dev/null 2>&1 || need_packages dpkg-dev
unit_text=$(dpkg-deb --fsys-tarfile "$work/debs/new.deb" | tar -xO --wildcards '*/systemd/system/replenish-agent.service')
echo "$tag: package ${deb#"$root"/} (version $version), older builds 0~older (agent.json a conffile) and 0~earliest"

# The checks every run must pass; status-line and watchdog only once the unit has Type=notify and WatchdogSec.
checks=(boot-ready wifi-setup dns-sd pairing wifi-outage dns-sd-withdrawn press power-cut no-timesyncd upgrade rollback idle wifi-dormant unknown-boot c-floor stop
  remove purge alexa-press alexa-power-cut)
grep -q '^Type=notify' <<<"$unit_text" && checks+=(status-line)
grep -q '^WatchdogSec=' <<<"$unit_text" && checks+=(watchdog)

# --- the disk image ---------------------------------------------------------------------------------------
step "disk image: the root file system, dpkg -i of the older build, the test's units and files"
tree=$work/tree
rm -rf "$tree" && mkdir -p "$tree"
# /usr (most of the tree) is hard-linked from the cache, never written in place (dpkg renames new files in);
# the rest is copied, since passwd, dpkg's status and the like may be rewritten in place.
for entry in "$rootfs"/* "$rootfs"/.[!.]*; do
  [ -e "$entry" ] || continue
  if [ "${entry##*/}" = usr ]; then cp -al "$entry" "$tree/"; else cp -a "$entry" "$tree/"; fi
done
# As a device image is made: the config in place first (0~older's agent.json is a conffile: kept), then dpkg -i, whose
# postinst makes the user and, the config being edited, enables the unit.
boot=scripts/vm/boot
install -D -m 0640 "$boot/agent.json" "$tree/etc/replenish-agent/agent.json"
cp "$work/debs/older.deb" "$tree/tmp/replenish-agent-older.deb"
chroot "$tree" dpkg -i --force-confdef --force-confold /tmp/replenish-agent-older.deb >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; die "dpkg -i of the older build into the image failed"; }
rm "$tree/tmp/replenish-agent-older.deb"
cmp -s "$boot/agent.json" "$tree/etc/replenish-agent/agent.json" || die "dpkg -i replaced the test config"
# As a maker whose units onboard over Wi-Fi does: the package's ap0 unit enabled (it runs when wlan0 appears).
chroot "$tree" systemctl enable replenish-agent-ap0.service >/dev/null 2>&1 || die "systemctl enable replenish-agent-ap0.service failed"
install -D -m 0755 "$emulator" "$tree/usr/local/bin/replenish-emulator"
install -D -m 0755 "$companion" "$tree/usr/local/bin/replenish-companion"
# The unit's setup key (16 random bytes as 32 hex digits, what `replenish-agent make-setup-key` writes; the
# binary is not run in the tree, which has no /proc for its arguments), the agent's user's only, named by the
# config.
(umask 077 && openssl rand -hex 16 >"$tree/etc/replenish-agent/setup-key")
chroot "$tree" chown replenish: /etc/replenish-agent/setup-key
if [ -n "${emulator_libraries:-}" ]; then
  # On the loader's path for the emulator's every use (its unit, and `replenish-emulator companion` in the runner).
  mkdir -p "$tree/usr/local/lib/vm-test/swift"
  cp -L "$emulator_libraries"/*.so "$tree/usr/local/lib/vm-test/swift/"
  echo /usr/local/lib/vm-test/swift >"$tree/etc/ld.so.conf.d/vm-test-swift.conf"
  chroot "$tree" ldconfig
fi
install -D -m 0644 "$gpio_sim/gpio-sim.ko" "$tree/usr/local/lib/vm-test/gpio-sim.ko"
install -m 0755 "$c_agent" "$tree/usr/local/lib/vm-test/c-agent"
install -m 0755 "$boot/gpio-sim-chip.sh" "$boot/runner.sh" "$boot/wifi-radios.sh" "$tree/usr/local/lib/vm-test/"
install -m 0644 "$boot/home-avahi.conf" "$tree/usr/local/lib/vm-test/"
install -m 0644 scripts/vm/context-switches.sh "$tree/usr/local/lib/vm-test/"
# systemd's generators, but for fstab's, masked: each is a process run at boot and at every daemon-reload (the
# package's scripts and the runner reload 9 times in boot 2), where a reload took 6-14 s of the emulated arm64
# CPU. None of them has anything to generate here (no getty wanted on the console, no init scripts without a
# unit, no encrypted or GPT-discovered disks, nothing on the kernel's command line); the agent uses none.
mkdir -p "$tree/etc/systemd/system-generators"
for generator in "$tree"/usr/lib/systemd/system-generators/*; do
  [ "${generator##*/}" = systemd-fstab-generator ] || ln -sfn /dev/null "$tree/etc/systemd/system-generators/${generator##*/}"
done
# The unit's APT repository (its only source: the VM has no network), as a maker's would serve the releases:
# this one, 0~older and 0~earliest, with a Packages index; runner.sh updates from it with apt-get.
apt_repo=$tree/usr/local/lib/vm-test/apt
mkdir -p "$apt_repo"
cp "$work/debs/new.deb" "$apt_repo/replenish-agent_${version}_$arch.deb"
cp "$work/debs/older.deb" "$apt_repo/replenish-agent_0~older_$arch.deb"
cp "$work/debs/earliest.deb" "$apt_repo/replenish-agent_0~earliest_$arch.deb"
(cd "$apt_repo" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null)
[ "$(grep -c '^Package: replenish-agent$' "$apt_repo/Packages")" = 3 ] || die "the test's APT repository lists not 3 builds"
: >"$tree/etc/apt/sources.list"
rm -f "$tree"/etc/apt/sources.list.d/*
echo "deb [trusted=yes] file:/usr/local/lib/vm-test/apt ./" >"$tree/etc/apt/sources.list.d/vm-test.list"
install -D -m 0644 "$boot/board.json" "$tree/usr/local/share/vm-test/board.json"
# Program alexa beside it (runner.sh's alexa-press, alexa-power-cut): a second agent on the simulated board, its
# unit the package's with its own config, state and runtime folders (started by the runner); nginx doing mutual
# TLS in front of the emulator's maker's cloud; the certificates made here: the cloud's for 127.0.0.1 and the
# unit's (CN VMBOOT1, the agent's user's key) from the maker's CA, which nginx trusts.
alexa=$tree/etc/replenish-agent/alexa
mkdir -p "$alexa" "$work/alexa-ca"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$work/alexa-ca/server-ca.key" -out "$alexa/ca.pem" -subj "/CN=vm cloud CA" \
  -days 30 2>/dev/null &&
  openssl req -new "${ec[@]}" -keyout "$alexa/server.key" -out "$work/alexa-ca/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null &&
  openssl x509 -req -in "$work/alexa-ca/server.csr" -CA "$alexa/ca.pem" -CAkey "$work/alexa-ca/server-ca.key" \
    -CAcreateserial -days 30 -extfile <(printf 'subjectAltName=IP:127.0.0.1') -out "$alexa/server.pem" 2>/dev/null &&
  openssl req -x509 "${ec[@]}" -keyout "$work/alexa-ca/maker-ca.key" -out "$alexa/maker-ca.pem" -subj "/CN=vm maker CA" \
    -days 30 2>/dev/null &&
  openssl req -new "${ec[@]}" -keyout "$alexa/unit.key" -out "$work/alexa-ca/unit.csr" -subj "/CN=VMBOOT1" 2>/dev/null &&
  openssl x509 -req -in "$work/alexa-ca/unit.csr" -CA "$alexa/maker-ca.pem" -CAkey "$work/alexa-ca/maker-ca.key" \
    -CAcreateserial -days 30 -out "$alexa/unit.pem" 2>/dev/null || die "openssl could not make the alexa certificates"
rm -rf "$work/alexa-ca"
chmod 600 "$alexa/unit.key" "$alexa/server.key"
chroot "$tree" chown replenish: /etc/replenish-agent/alexa/unit.key
install -m 0644 "$boot/alexa.json" "$tree/etc/replenish-agent/alexa.json"
install -m 0644 "$boot/nginx-alexa.conf" "$tree/usr/local/lib/vm-test/nginx-alexa.conf"
sed -e 's|/etc/replenish-agent/agent.json|/etc/replenish-agent/alexa.json|g' \
  -e 's|^Description=.*|Description=VM boot test: a second agent, of program alexa|' \
  -e 's|^StateDirectory=replenish-agent$|StateDirectory=replenish-agent-alexa|' \
  -e 's|^ReadWritePaths=/var/lib/replenish-agent$|ReadWritePaths=/var/lib/replenish-agent-alexa|' \
  -e 's|^RuntimeDirectory=replenish-agent$|RuntimeDirectory=replenish-agent-alexa|' \
  -e 's|^After=\(.*\)|After=\1 replenish-emulator.service vm-test-nginx.service|' \
  <<<"$unit_text" >"$tree/etc/systemd/system/replenish-agent-alexa.service"
grep -q 'StateDirectory=replenish-agent-alexa' "$tree/etc/systemd/system/replenish-agent-alexa.service" ||
  die "the alexa agent's unit was not made from the package's"
# The package's own site of nginx is not the test's (its unit would serve port 80 at every boot).
chroot "$tree" systemctl mask nginx.service >/dev/null 2>&1 || die "systemctl mask nginx.service failed"
for service in gpio-sim-chip replenish-emulator vm-test-runner vm-test-restored-clock vm-test-lo-multicast vm-test-wifi vm-test-nginx; do
  # (the runner writes to the serial console: ttyS0 on a PC, ttyAMA0 on an arm64 virt machine)
  sed "s|/dev/ttyS0|/dev/$serial|" "$boot/$service.service" >"$work/$service.service"
  install -D -m 0644 "$work/$service.service" "$tree/etc/systemd/system/$service.service"
  mkdir -p "$tree/etc/systemd/system/multi-user.target.wants"
  ln -sf "/etc/systemd/system/$service.service" "$tree/etc/systemd/system/multi-user.target.wants/$service.service"
done
image=$work/disk.img
rm -f "$image"
size_mb=$(($(du -sm "$tree" | cut -f1) + 768))
mkfs.ext4 -q -F -L vmroot -d "$tree" "$image" "${size_mb}M" >/dev/null
rm -rf "$tree"
echo "$tag: disk image ${size_mb} MB (sparse: $(du -m "$image" | cut -f1) MB used)"

# --- the boots --------------------------------------------------------------------------------------------
# boot_vm N: boots the image (power-on to power-off, or the timeout) with its console in console-bootN.log.
boot_vm() {
  local console=$work/console-boot$1.log status=0 boot_started
  step "boot $1 (timeout $boot_timeout s)"
  boot_started=$(date +%s)
  timeout -k 10 "$boot_timeout" "${qemu[@]}" -smp "$smp" -m 1024 -nographic -no-reboot \
    -nic none -drive "file=$image,if=virtio,format=raw,cache=unsafe" \
    -kernel "$rootfs/boot/vmlinuz-$kver" -initrd "$rootfs/boot/initrd.img-$kver" \
    -append "console=$serial root=/dev/vda rw quiet panic=-1" </dev/null 2>&1 |
    vm_console_filter | tee "$console" | { grep --line-buffered -E '^(VM-TEST|vm-boot-test:)' || true; } |
    sed -u "s/^/[boot $1] /" || status=$?
  echo "[boot $1] $(($(date +%s) - boot_started)) s; console in ${console#"$root"/}"
  if ! grep -q "^VM-TEST END boot $1" "$console"; then
    echo "[boot $1] the runner did not finish this boot (status $status); last console lines:"
    tail -n 30 "$console" | sed "s/^/[boot $1]   /"
  fi
}
rm -f "$work"/console-boot*.log
boot_vm 1
boot_vm 2

passed=0
failed=0
for name in "${checks[@]}"; do
  # (grep reads the files itself: `cat … | grep -q` fails under pipefail when grep quits early)
  if grep -qx "VM-TEST PASS $name" "$work"/console-boot*.log; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    grep -q "^VM-TEST FAIL $name:" "$work"/console-boot*.log || echo "VM-TEST FAIL $name: no result"
  fi
done
# The footprint on this device (issue #21's figures for its CPU): the agent that the upgrade restarted, after
# its order and its idle minute, and the C floor after its two orders in the same boot (runner.sh's idle and
# c-floor).
figure_of() { sed -n "s/^VM-TEST FIGURE $1 \([0-9][0-9]*\)$/\1/p" "$work/console-boot2.log" 2>/dev/null | tail -n 1; }
footprint_row() {
  local agent c
  agent=$(figure_of "agent-$2") c=$(figure_of "c-floor-$2")
  awk -v name="$1" -v a="${agent:-}" -v c="${c:-}" -v unit="$3" '
    function shown(value) { return value == "" ? "-" : (unit == "" ? value : value " " unit) }
    BEGIN { printf "| %s | %s | %s | %s |\n", name, shown(a), shown(c),
      (a == "" || c == "" || c + 0 == 0) ? "-" : sprintf("%.2f×", a / c) }'
}
step "footprint on this device ($arch, $release; the agent after the upgrade's order and its idle minute, the C floor after its 2 orders)"
echo "| figure | agent | C floor | agent / C |"
echo "|---|---|---|---|"
footprint_row RSS rss-kb kB
footprint_row "anonymous RSS" rss-anon-kb kB
footprint_row "file-backed RSS" rss-file-kb kB
footprint_row "binary, stripped" binary-bytes bytes
footprint_row threads threads ""
step "done"
echo "$tag: $passed passed, $failed failed (checks: ${checks[*]})"
[ "$failed" -eq 0 ]
