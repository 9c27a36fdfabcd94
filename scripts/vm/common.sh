# Shared by scripts/vm-test.sh and scripts/vm-boot-test.sh (sourced, not run): host packages, Debian's 6.1
# kernel behind linux-image-amd64 and the out-of-tree gpio-sim module built for it.
# Expects: $root (the repository), $vm (its .build/vm), $tag (the prefix of messages: vm-test, vm-boot-test).
# After `vm_prepare_gpio_sim`: $kver (e.g. 6.1.0-41-amd64), $source_version, $gpio_sim (folder with
# gpio-sim.ko). After `vm_prepare_kernel`: $kernel (folder with vmlinuz and configfs.ko).
# Everything downloaded or built goes under $vm and is reused. Network: Debian's package archive only (apt).

export PATH=$PATH:/usr/sbin:/sbin # modinfo, mkfs.ext4
. "$root/scripts/apt.sh"
. "$root/scripts/cache.sh"
apt_user=()
[ "$(id -u)" -eq 0 ] && apt_user=(-o APT::Sandbox::User=root) # downloads into folders _apt cannot write
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
step() { echo "== $tag: $* ($(elapsed) s)"; }
die() {
  echo "$tag: $*" >&2
  exit 1
}

# --- host packages ----------------------------------------------------------------------------------------
installed() { apt_installed "$1"; }
apt_updated=0
apt_update() {
  [ "$apt_updated" = 1 ] && return 0
  apt_what="package lists" apt_as_root apt-get update -qq
  apt_updated=1
}
# need_packages PACKAGE...: apt-get install what is missing (scripts/apt.sh: as root or through sudo).
need_packages() { apt_install "$@" || die "could not install $*"; }
candidate() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'; }

# download PACKAGE[=VERSION] FOLDER: apt-get download into FOLDER; prints the .deb's path.
download() {
  mkdir -p "$2"
  (cd "$2" && apt-get "${apt_user[@]}" download -qq "$1" >/dev/null 2>&1) || die "apt-get download $1 failed"
  ls -t "$2/${1%%=*}_"*.deb | head -n 1
}

# vm_host_packages [PACKAGE...]: QEMU, the module build tools and the headers of the kernel; sets $kver and
# $source_version.
vm_host_packages() {
  step "host packages"
  need_packages qemu-system-x86 kmod xz-utils make gcc libc6-dev binutils "$@"
  if [ -z "$(candidate linux-source-6.1)" ] || [ "$(candidate linux-source-6.1)" = "(none)" ]; then apt_update; fi
  # The kernel: the ABI that Debian's linux-image-amd64 currently points to (6.1 in bookworm).
  kver=$(apt-cache show --no-all-versions linux-image-amd64 |
    sed -n 's/^Depends: *linux-image-\(6\.1\.0-[0-9]*-amd64\).*/\1/p' | head -n 1)
  [ -n "$kver" ] || die "no 6.1 kernel found behind linux-image-amd64 (is this Debian 12?)"
  source_version=$(candidate linux-source-6.1)
  need_packages "linux-headers-$kver"
  [ -d "/usr/src/linux-headers-$kver" ] || die "/usr/src/linux-headers-$kver is missing"
}

# vm_prepare_kernel: vmlinuz and configfs.ko of linux-image-$kver in $kernel.
vm_prepare_kernel() {
  kernel=$vm/kernel/$kver
  if [ ! -s "$kernel/vmlinuz" ] || [ ! -s "$kernel/configfs.ko" ]; then
    step "kernel $kver: apt-get download linux-image-$kver"
    local deb module
    deb=$(download "linux-image-$kver" "$vm/debs")
    rm -rf "$kernel.tmp" && mkdir -p "$kernel.tmp"
    dpkg-deb --fsys-tarfile "$deb" |
      tar -x -C "$kernel.tmp" --wildcards "./boot/vmlinuz-$kver" "./lib/modules/$kver/kernel/fs/configfs/configfs.ko*"
    cp "$kernel.tmp/boot/vmlinuz-$kver" "$kernel.tmp/vmlinuz"
    module=$(ls "$kernel.tmp/lib/modules/$kver/kernel/fs/configfs/"configfs.ko*)
    case "$module" in
    *.xz) xz -dc "$module" >"$kernel.tmp/configfs.ko" ;;
    *) cp "$module" "$kernel.tmp/configfs.ko" ;;
    esac
    rm -rf "$kernel.tmp/boot" "$kernel.tmp/lib" "$kernel" && mv "$kernel.tmp" "$kernel"
    rm -f "$deb" # the extracted files are the cache
  fi
}

# vm_prepare_gpio_sim: gpio-sim.ko for $kver in $gpio_sim. Debian does not build gpio-sim; it is built out of
# tree from linux-source-6.1 (see scripts/vm/gpio-sim/Kbuild).
vm_prepare_gpio_sim() {
  local sources=$vm/src/linux-source-$source_version deb
  if ! vm_gpio_sim_sources_cached 6.1 "$source_version"; then
    deb=$(download "linux-source-6.1=$source_version" "$vm/debs")
    vm_gpio_sim_sources 6.1 "$source_version" "$deb"
    rm -f "$deb"
  fi
  gpio_sim=$vm/gpio-sim/$kver
  if ! vm_gpio_sim_fresh "$gpio_sim"; then
    vm_gpio_sim_tree "$sources" "$gpio_sim"
    make -s -C "/usr/src/linux-headers-$kver" M="$gpio_sim" modules >"$gpio_sim/build.log" 2>&1 ||
      { cat "$gpio_sim/build.log"; die "building gpio-sim.ko failed"; }
    strip --strip-debug "$gpio_sim/gpio-sim.ko"
    echo "$source_version" >"$gpio_sim/source-version"
  fi
  vm_gpio_sim_check "$gpio_sim"
}

# vm_gpio_sim_fresh DIR: 0 when DIR holds gpio-sim.ko built from this Kbuild and $source_version.
vm_gpio_sim_fresh() {
  [ -s "$1/gpio-sim.ko" ] && cmp -s "$root/scripts/vm/gpio-sim/Kbuild" "$1/Kbuild" &&
    grep -qx "$source_version" "$1/source-version" 2>/dev/null
}

# vm_gpio_sim_tree SOURCES DIR: the module's source tree in DIR (new): the Kbuild, gpio-sim.c, gpiolib.h and
# irq_sim.c with the one change that makes it build out of tree.
vm_gpio_sim_tree() {
  step "gpio-sim: building the module for $kver"
  rm -rf "$2" && mkdir -p "$2"
  cp "$root/scripts/vm/gpio-sim/Kbuild" "$1/gpiolib.h" "$2/"
  cp "$1/gpio-sim.c" "$2/gpio-sim-core.c"
  sed 's/handle_simple_irq(irq_to_desc(irqnum))/generic_handle_irq(irqnum)/' "$1/irq_sim.c" >"$2/irq_sim.c"
  grep -q 'generic_handle_irq(irqnum)' "$2/irq_sim.c" || die "irq_sim.c of $source_version: the patch no longer applies"
}

# vm_gpio_sim_check DIR: dies unless DIR/gpio-sim.ko is for $kver.
vm_gpio_sim_check() {
  [ "$(modinfo -F vermagic "$1/gpio-sim.ko" | awk '{ print $1 }')" = "$kver" ] || die "gpio-sim.ko is not for $kver"
}

# vm_gpio_sim_sources SERIES VERSION DEB: the three source files of gpio-sim from linux-source-SERIES's
# tarball (the .deb at DEB, downloaded by the caller), in $vm/src/linux-source-VERSION; sets $sources. They are
# kept in the test command's cache (scripts/cache.sh): the next clone takes them from there
# (vm_gpio_sim_sources_cached), without the 150 MB download and the whole tarball's xz.
vm_gpio_sim_sources() {
  sources=$vm/src/linux-source-$2
  [ -s "$sources/irq_sim.c" ] && return 0
  step "gpio-sim sources: linux-source-$1=$2"
  rm -rf "$sources.tmp" && mkdir -p "$sources.tmp"
  dpkg-deb --fsys-tarfile "$3" | tar -xO "./usr/src/linux-source-$1.tar.xz" |
    tar -xJ -C "$sources.tmp" --strip-components=3 "linux-source-$1/drivers/gpio/gpio-sim.c" \
      "linux-source-$1/drivers/gpio/gpiolib.h" "linux-source-$1/kernel/irq/irq_sim.c"
  rm -rf "$sources" && mv "$sources.tmp" "$sources"
  # Not fatal: scripts/vm-test.sh may run as a user who cannot write a folder root's run made.
  [ "$cache_root" = off ] || cache_store "gpio-sim-sources-$1" "$(vm_gpio_sim_sources_key "$1" "$2")" "$sources" || true
}

# vm_gpio_sim_sources_key SERIES VERSION: the cache's key of the three files: the package's version and the
# function that extracts them.
vm_gpio_sim_sources_key() {
  printf 'linux-source-%s=%s\n%s\n' "$1" "$2" "$(declare -f vm_gpio_sim_sources)" | sha256sum | cut -c1-32
}

# vm_gpio_sim_sources_cached SERIES VERSION: 0 when the three source files of linux-source-SERIES=VERSION are in
# $vm/src/linux-source-VERSION, there already or now from the cache (its SHA-256 checked); 1 when they must be
# extracted (vm_gpio_sim_sources).
vm_gpio_sim_sources_cached() {
  local dir=$vm/src/linux-source-$2
  [ -s "$dir/irq_sim.c" ] && return 0
  [ "$cache_root" != off ] || return 1
  rm -rf "$dir" && mkdir -p "$vm/src"
  cache_restore "gpio-sim-sources-$1" "$(vm_gpio_sim_sources_key "$1" "$2")" "$dir" && [ -s "$dir/irq_sim.c" ]
}

# vm_console_filter: the console stream without carriage returns and terminal escapes.
vm_console_filter() { sed -u -e 's/\r$//' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g'; }
