# The arm64 side of scripts/vm-boot-test.sh (sourced after scripts/vm/common.sh): Debian trixie's arm64
# kernel and the out-of-tree gpio-sim module cross-built for it, without emulation.
# After `vm_arm64_prepare`: $kver (e.g. 6.12.117+deb13-arm64), $source_version, $gpio_sim (folder with
# gpio-sim.ko).
#
# The module is built in a trixie amd64 chroot ($vm/kbuild-trixie, mmdebstrap minbase): trixie's
# gcc-aarch64-linux-gnu (gcc 14, as the kernel was built with), the amd64 linux-kbuild of the kernel's ABI
# (fixdep, modpost), and the arm64 linux-headers unpacked into it; Debian's headers set ARCH and CROSS_COMPILE
# themselves. Everything comes from Debian's archive with apt.

vm_arm64_kbuild=$vm/kbuild-trixie
vm_arm64_mirror=http://deb.debian.org/debian

# vm_arm64_chroot COMMAND…: COMMAND in the kbuild chroot.
vm_arm64_chroot() { chroot "$vm_arm64_kbuild" env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

vm_arm64_prepare() {
  # lintian: scripts/check-deb.sh checks the arm64 package with trixie's.
  local recipe packages=(make gcc-aarch64-linux-gnu libc6-dev kmod xz-utils lintian) abi deb
  need_packages mmdebstrap kmod
  mkdir -p "$vm"
  recipe="trixie amd64,arm64 ${packages[*]}"
  # Not here yet: the cache outside the clone (scripts/cache.sh) may have it with the headers unpacked, keyed by
  # this function's text and trixie's state in the archive.
  local key="" made=0
  if [ ! -d "$vm_arm64_kbuild" ]; then
    key=$(cache_key "$(declare -f vm_arm64_prepare) $recipe" "deb $vm_arm64_mirror trixie main") || key=""
    cache_restore arm64-kbuild "$key" "$vm_arm64_kbuild" && echo "$recipe" >"$vm_arm64_kbuild.recipe"
  fi
  if [ "$(cat "$vm_arm64_kbuild.recipe" 2>/dev/null)" != "$recipe" ]; then
    step "kbuild chroot: mmdebstrap trixie amd64 with the arm64 cross compiler"
    rm -rf "$vm_arm64_kbuild" "$vm_arm64_kbuild.recipe"
    mmdebstrap --mode=root --variant=minbase --architectures=amd64,arm64 \
      --aptopt='Acquire::Check-Valid-Until "false"' --include="$(
        IFS=,
        echo "${packages[*]}"
      )" trixie "$vm_arm64_kbuild" "deb $vm_arm64_mirror trixie main" >"$vm/mmdebstrap-kbuild.log" 2>&1 ||
      { tail -n 30 "$vm/mmdebstrap-kbuild.log"; die "mmdebstrap of the kbuild chroot failed"; }
    echo "$recipe" >"$vm_arm64_kbuild.recipe"
    made=1
  fi
  vm_arm64_chroot apt-get -o Acquire::Check-Valid-Until=false update -qq >/dev/null ||
    die "apt-get update in the kbuild chroot failed"
  # The kernel: the ABI that trixie's linux-image-arm64 points to.
  kver=$(vm_arm64_chroot apt-cache depends linux-image-arm64:arm64 |
    sed -n 's/^ *Depends: linux-image-\([0-9][^:]*-arm64\)\(:arm64\)\{0,1\}$/\1/p' | head -n 1)
  [ -n "$kver" ] || die "no kernel behind trixie's linux-image-arm64"
  abi=${kver%-arm64}
  source_version=$(vm_arm64_chroot apt-cache policy linux-source-6.12 | awk '/Candidate:/ { print $2 }')
  [ -n "$source_version" ] && [ "$source_version" != "(none)" ] || die "no linux-source-6.12 in trixie"
  if [ ! -d "$vm_arm64_kbuild/usr/src/linux-headers-$kver" ]; then
    step "kernel headers $kver (arm64) and linux-kbuild-$abi (amd64)"
    vm_arm64_chroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "linux-kbuild-$abi" >/dev/null 2>&1 || die "apt-get install linux-kbuild-$abi failed"
    rm -rf "$vm_arm64_kbuild/tmp/debs" && mkdir -p "$vm_arm64_kbuild/tmp/debs"
    vm_arm64_chroot sh -c "cd /tmp/debs && apt-get -qq download linux-headers-$kver:arm64 linux-headers-$abi-common" \
      2>/dev/null || die "apt-get download of the arm64 headers failed"
    for deb in "$vm_arm64_kbuild"/tmp/debs/*.deb; do dpkg-deb -x "$deb" "$vm_arm64_kbuild"; done
    rm -rf "$vm_arm64_kbuild/tmp/debs"
    made=1
  fi
  [ "$made" = 0 ] || cache_store arm64-kbuild "$key" "$vm_arm64_kbuild"
  if ! vm_gpio_sim_sources_cached 6.12 "$source_version"; then
    mkdir -p "$vm_arm64_kbuild/tmp/debs"
    vm_arm64_chroot sh -c "cd /tmp/debs && apt-get -qq download linux-source-6.12=$source_version" 2>/dev/null ||
      die "apt-get download linux-source-6.12 failed"
    deb=$(ls "$vm_arm64_kbuild"/tmp/debs/linux-source-6.12_*.deb)
    vm_gpio_sim_sources 6.12 "$source_version" "$deb"
    rm -rf "$vm_arm64_kbuild/tmp/debs"
  fi
  sources=$vm/src/linux-source-$source_version
  gpio_sim=$vm/gpio-sim/$kver
  if ! vm_gpio_sim_fresh "$gpio_sim"; then
    local build=$vm_arm64_kbuild/tmp/gpio-sim
    vm_gpio_sim_tree "$sources" "$build"
    vm_arm64_chroot make -s -C "/usr/src/linux-headers-$kver" M=/tmp/gpio-sim modules >"$build/build.log" 2>&1 ||
      { cat "$build/build.log"; die "building gpio-sim.ko for $kver failed"; }
    vm_arm64_chroot aarch64-linux-gnu-strip --strip-debug /tmp/gpio-sim/gpio-sim.ko
    rm -rf "$gpio_sim" && mkdir -p "$gpio_sim"
    cp "$build/gpio-sim.ko" "$build/Kbuild" "$gpio_sim/"
    echo "$source_version" >"$gpio_sim/source-version"
    rm -rf "$build"
  fi
  vm_gpio_sim_check "$gpio_sim"
}
