#!/usr/bin/env bash
# Real-kernel GPIO tests: boots Debian's 6.1 kernel in QEMU (TCG) with an initramfs holding busybox, the
# out-of-tree gpio-sim module and `replenish-agent`, and runs scripts/vm/init.sh there: a gpio-sim chip is a
# real /dev/gpiochipN, so the agent requests its lines through libgpiod and the kernel's GPIO character
# device exactly as on a board, while the test presses the simulated button through gpio-sim's sysfs.
#
#   scripts/vm-test.sh [v1|v2|all]      (default all)
#
# v1: the agent built against the system's libgpiod 1.6 (libgpiod-dev), in .build.
# v2: the agent built against libgpiod 2.1 from bookworm-backports, unpacked into .build/vm/gpiod2 through a
#     private apt configuration (the machine's apt sources are not changed), in .build-gpiod2.
# Everything downloaded or built goes under .build/vm (and .build-gpiod2) and is reused by the next run. The
# only network use is Debian's package archive (apt). Needs root or sudo for apt-get install only.
# Exit status 0 only if every check passed for every requested API version.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
vm=$root/.build/vm
mode=${1:-all}
case "$mode" in
v1) apis=(v1) ;;
v2) apis=(v2) ;;
all) apis=(v1 v2) ;;
*)
  echo "usage: scripts/vm-test.sh [v1|v2|all]" >&2
  exit 2
  ;;
esac
vm_timeout=${VM_TEST_TIMEOUT:-300} # seconds for one VM run, boot to poweroff
idle_seconds=${VM_IDLE_SECONDS:-60} # the idle window measured by the `idle` check
# Every check init.sh makes; each must print PASS in each VM run.
checks=(ready api bias busy short-press bounce long-press idle stop ready-by-name level-at-start short-press-by-name led)

tag=vm-test
. scripts/vm/common.sh

vm_host_packages busybox-static cpio libgpiod-dev
vm_prepare_kernel
vm_prepare_gpio_sim

# --- libgpiod 2.x (v2), without touching the machine's apt sources ----------------------------------------
gpiod2=$vm/gpiod2
gpiod2_lib=$gpiod2/usr/lib/x86_64-linux-gnu
if [[ " ${apis[*]} " == *" v2 "* ]] && [ ! -e "$gpiod2_lib/libgpiod.so.3" ]; then
  step "libgpiod 2.x from bookworm-backports (private apt configuration)"
  apt_dir=$vm/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" \
    >"$apt_dir/backports.list"
  private=(-o "Dir::Etc::SourceList=$apt_dir/backports.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" "${apt_user[@]}")
  apt-get "${private[@]}" update -qq >/dev/null
  rm -rf "$apt_dir/debs" && mkdir -p "$apt_dir/debs"
  (cd "$apt_dir/debs" && apt-get "${private[@]}" download -qq libgpiod-dev/bookworm-backports \
    libgpiod3/bookworm-backports >/dev/null 2>&1) || die "apt-get download of libgpiod 2.x failed"
  rm -rf "$gpiod2" && mkdir -p "$gpiod2"
  for deb in "$apt_dir/debs/"*.deb; do dpkg-deb -x "$deb" "$gpiod2"; done
fi
if [[ " ${apis[*]} " == *" v2 "* ]]; then
  # SwiftPM puts pkg-config's -L flags ahead of -Xlinker -L; the system's libcrypto.pc says
  # -L/usr/lib/x86_64-linux-gnu, where -lgpiod would find libgpiod 1.6. The same .pc without that -L (the
  # linker searches that folder anyway) lets -lgpiod find the unpacked 2.x first.
  mkdir -p "$gpiod2/pkgconfig"
  sed -E 's/^(Libs:.*)-L\$\{libdir\} ?/\1/' /usr/lib/x86_64-linux-gnu/pkgconfig/libcrypto.pc >"$gpiod2/pkgconfig/libcrypto.pc"
fi

# --- the agent --------------------------------------------------------------------------------------------
# build API: builds the agent for the API; sets `binary` and `library_path` (for ldd).
build_agent() {
  local log=$vm/build-$1.log flags=() scratch=.build-deb
  library_path=""
  if [ "$1" = v2 ]; then
    scratch=.build-gpiod2
    flags=(--pkg-config-path "$gpiod2/pkgconfig" -Xcc "-I$gpiod2/usr/include" -Xlinker "-L$gpiod2_lib")
    library_path=$gpiod2_lib
  else
    # The package's build (scripts/deb.sh: its scratch folder and flags), done already when CI gets here.
    mapfile -t flags < <(bash scripts/release-flags.sh)
    flags=(--static-swift-stdlib "${flags[@]}")
  fi
  step "building replenish-agent for libgpiod $1"
  swift build -c release --product replenish-agent --scratch-path "$scratch" "${flags[@]}" >"$log" 2>&1 ||
    { cat "$log"; die "swift build ($1) failed"; }
  tail -n 1 "$log"
  binary=$root/$scratch/release/replenish-agent # (--show-bin-path would wait for .build's lock again)
  [ -x "$binary" ] || die "$binary is missing after the build"
  local libgpiod
  libgpiod=$(LD_LIBRARY_PATH=$library_path ldd "$binary" | grep 'libgpiod\.so' || true)
  echo "vm-test: $1 binary: $libgpiod"
  case "$1" in
  v1) [[ "$libgpiod" == *"libgpiod.so.2 => /"* ]] || die "the v1 binary does not link the system's libgpiod.so.2" ;;
  v2) [[ "$libgpiod" == *"libgpiod.so.3 => $gpiod2_lib/libgpiod.so.3 "* && "$libgpiod" != *"libgpiod.so.2"* ]] ||
    die "the v2 binary does not link $gpiod2_lib/libgpiod.so.3 (alone)" ;;
  esac
}

# make_initramfs API: busybox, /init, the modules, the agent and every library ldd lists for it.
make_initramfs() {
  local stage=$vm/initramfs-$1 library destination
  rm -rf "$stage"
  mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc,lib/modules,opt/replenish,proc,sys,dev,tmp,lib/x86_64-linux-gnu}
  cp /bin/busybox "$stage/bin/busybox"
  install -m 0755 scripts/vm/init.sh "$stage/init"
  printf 'API=%s\nIDLE_SECONDS=%s\n' "$1" "$idle_seconds" >"$stage/etc/vm-test.env"
  cp "$kernel/configfs.ko" "$gpio_sim/gpio-sim.ko" "$stage/lib/modules/"
  cp "$binary" "$stage/opt/replenish/replenish-agent"
  while read -r library; do
    destination=$library
    # The unpacked libgpiod 2.x goes where the distribution's package would put it.
    [[ "$library" == "$gpiod2"/* ]] && destination=/lib/x86_64-linux-gnu/${library##*/}
    mkdir -p "$stage${destination%/*}"
    cp -L "$library" "$stage$destination"
  done < <(LD_LIBRARY_PATH=$library_path ldd "$binary" |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
  initramfs=$vm/initramfs-$1.cpio.gz
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1 >"$initramfs")
  echo "vm-test: $1 initramfs $(($(stat -c %s "$initramfs") / 1024 / 1024)) MB ($(du -sm "$stage" | cut -f1) MB unpacked)"
  rm -rf "$stage"
}

# run_vm API: boots the VM, streams its VM-TEST lines, and checks that every check passed.
passed=0
failed=0
run_vm() {
  local console=$vm/console-$1.log status=0 vm_started name
  step "VM run, libgpiod $1 (timeout $vm_timeout s)"
  vm_started=$(date +%s)
  # -nic none: the VM has no network at all.
  timeout -k 10 "$vm_timeout" qemu-system-x86_64 -accel tcg -cpu max -m 512 -nographic -no-reboot -nic none \
    -kernel "$kernel/vmlinuz" -initrd "$initramfs" \
    -append "console=ttyS0 rdinit=/init quiet panic=-1" </dev/null 2>&1 |
    vm_console_filter | tee "$console" | { grep --line-buffered -E '^(VM-TEST|vm-test:)' || true; } | sed -u "s/^/[$1] /" ||
    status=$?
  vm_seconds[$1]=$(($(date +%s) - vm_started))
  for name in "${checks[@]}"; do
    if grep -qx "VM-TEST PASS $name" "$console"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      grep -q "^VM-TEST FAIL $name:" "$console" || echo "[$1] VM-TEST FAIL $name: no result (the VM run ended early)"
    fi
  done
  if ! grep -q '^VM-TEST END' "$console"; then
    echo "[$1] the VM did not finish its checks (status $status; timeout $vm_timeout s); last console lines:"
    tail -n 30 "$console" | sed "s/^/[$1]   /"
  fi
  echo "[$1] VM run: ${vm_seconds[$1]} s; console in ${console#"$root"/}"
}

declare -A vm_seconds
for api in "${apis[@]}"; do
  build_agent "$api"
  make_initramfs "$api"
  run_vm "$api"
done

step "done: ${apis[*]}"
echo "vm-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
