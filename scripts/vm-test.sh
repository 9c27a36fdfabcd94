#!/usr/bin/env bash
# Real-kernel GPIO tests: boots Debian's 6.1 kernel in QEMU (TCG) with an initramfs holding busybox, the
# out-of-tree gpio-sim module and `replenish-agent`, and runs scripts/vm/init.sh there: a gpio-sim chip is a
# real /dev/gpiochipN, so the agent requests its lines through libgpiod and the kernel's GPIO character
# device exactly as on a board, while the test presses the simulated button through gpio-sim's sysfs.
#
#   scripts/vm-test.sh [v1|v2|all]      (default all)
#   scripts/vm-test.sh packages         the host's packages only (QEMU, the kernel's headers: apt)
#   scripts/vm-test.sh prepare          the kernel, the gpio-sim module and libgpiod 2.x only, nothing built or
#                                       booted (scripts/test.sh runs it in the background while it compiles)
#
# v1: the package's binary (scripts/deb.sh's release build in .build-deb), against the system's libgpiod 1.6.
# v2: the same build linked again against libgpiod 2.1 from bookworm-backports (unpacked into .build/vm/gpiod2
#     through a private apt configuration; the machine's apt sources are not changed), in .build/vm/v2.
# Everything downloaded or built goes under .build/vm and is reused by the next run. The
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
all | prepare | packages) apis=(v1 v2) ;;
*)
  echo "usage: scripts/vm-test.sh [v1|v2|all|packages|prepare]" >&2
  exit 2
  ;;
esac
vm_timeout=${VM_TEST_TIMEOUT:-300} # seconds for one VM run, boot to poweroff
idle_seconds=${VM_IDLE_SECONDS:-60} # the idle window measured by the `idle` check
# Every check init.sh makes; each must print PASS in each VM run.
checks=(ready api bias busy short-press bounce long-press idle stop ready-by-name level-at-start short-press-by-name led)

tag=vm-test
. scripts/vm/common.sh

vm_host_packages busybox-static cpio libgpiod-dev jq
[ "$mode" = packages ] && exit 0
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
[ "$mode" = prepare ] && exit 0

# --- the agent --------------------------------------------------------------------------------------------
# v1 is the package's own binary: scripts/deb.sh's release build in .build-deb, with the device's flags; this
# build finds it up to date (test.sh has just packaged it) and only checks that.
#
# v2 is the same build linked again, not compiled again: the Swift code sees one libgpiod API whichever
# libgpiod is installed (Sources/CGpiod/include/cgpiod.h includes no libgpiod header; cgpiod.c chooses the API
# from the installed header), so only cgpiod.c differs. It is compiled against the 2.x header with the
# compile command SwiftPM used for it, and the agent is linked with SwiftPM's own link command (both read
# from the build's manifest, .build-deb/release.yaml), its object list naming that object instead, and the
# unpacked libgpiod 2.x's folder first on the library path. Same objects, flags, ordering file and linker
# scripts as the package's binary: only the GPIO shim and the libgpiod it links differ.

# manifest_args COMMAND: the arguments of COMMAND (a key of .build-deb/release.yaml), one a line.
manifest_args() {
  local manifest=$root/.build-deb/release.yaml
  awk -v key="  \"$1\":" '$0 == key { found = 1; next } found && /^    args: / { sub(/^    args: /, ""); print; exit }' \
    "$manifest" | jq -r '.[]'
}

# build API: the agent for the API; sets `binary` and `library_path` (for ldd).
build_agent() {
  local log=$vm/build-$1.log flags=() scratch
  scratch=$(readlink -f .build-deb) # the package's build folder, a link into the cache (scripts/cache.sh)
  library_path=""
  mapfile -t flags < <(bash scripts/release-flags.sh)
  step "the package's build of replenish-agent (libgpiod v1: .build-deb, scripts/deb.sh)"
  swift build -c release --product replenish-agent --static-swift-stdlib --scratch-path "$scratch" "${flags[@]}" \
    >"$log" 2>&1 || { cat "$log"; die "swift build failed"; }
  tail -n 1 "$log"
  binary=$scratch/release/replenish-agent # (--show-bin-path would wait for .build's lock again)
  [ -x "$binary" ] || die "$binary is missing after the build"
  if [ "$1" = v2 ]; then
    relink_for_gpiod2
    library_path=$gpiod2_lib
  fi
  local libgpiod
  libgpiod=$(LD_LIBRARY_PATH=$library_path ldd "$binary" | grep 'libgpiod\.so' || true)
  echo "vm-test: $1 binary: $libgpiod"
  case "$1" in
  v1) [[ "$libgpiod" == *"libgpiod.so.2 => /"* ]] || die "the v1 binary does not link the system's libgpiod.so.2" ;;
  v2) [[ "$libgpiod" == *"libgpiod.so.3 => $gpiod2_lib/libgpiod.so.3 "* && "$libgpiod" != *"libgpiod.so.2"* ]] ||
    die "the v2 binary does not link $gpiod2_lib/libgpiod.so.3 (alone)" ;;
  esac
}

# relink_for_gpiod2: from the package's build in .build-deb, the agent against libgpiod 2.x in $vm/v2; sets
# `binary`.
relink_for_gpiod2() {
  local out=$vm/v2 triple_dir compile=() link=() object new_object list arg args=()
  step "linking replenish-agent again for libgpiod v2 (cgpiod.c compiled against the 2.x header)"
  rm -rf "$out" && mkdir -p "$out"
  triple_dir=$(swift build -c release --static-swift-stdlib --scratch-path "$(readlink -f .build-deb)" --show-bin-path)
  object=$triple_dir/CGpiod.build/cgpiod.c.o
  mapfile -t compile < <(manifest_args "$object")
  [ ${#compile[@]} -gt 0 ] || die "no compile command for $object in .build-deb/release.yaml"
  new_object=$out/cgpiod.c.o
  # The 2.x header first; the output elsewhere; no dependency file (SwiftPM's own, which it reads).
  for arg in "${compile[@]}"; do
    case "$arg" in
    "$object") args+=("$new_object") ;;
    -MD | -MT | dependencies | -MF | *.d) ;;
    *) args+=("$arg") ;;
    esac
  done
  "${args[0]}" -I "$gpiod2/usr/include" "${args[@]:1}" || die "compiling cgpiod.c against libgpiod 2.x failed"
  nm "$new_object" | grep -q ' U gpiod_request_config_new$' || die "$new_object was not built for the v2 API"
  mapfile -t link < <(manifest_args "C.replenish-agent-x86_64-unknown-linux-gnu-release.exe")
  [ ${#link[@]} -gt 0 ] || die "no link command for replenish-agent in .build-deb/release.yaml"
  args=()
  for arg in "${link[@]}"; do
    case "$arg" in
    @*)
      list=$out/Objects.LinkFileList
      grep -c "/CGpiod.build/cgpiod.c.o" "${arg#@}" | grep -qx 1 || die "${arg#@} does not list cgpiod.c.o once"
      sed "s|^.*/CGpiod\.build/cgpiod\.c\.o$|$new_object|" "${arg#@}" >"$list"
      args+=("@$list")
      ;;
    "$triple_dir/replenish-agent") args+=("$out/replenish-agent") ;;
    *) args+=("$arg") ;;
    esac
  done
  "${args[0]}" "-L$gpiod2_lib" "${args[@]:1}" >"$out/link.log" 2>&1 || { cat "$out/link.log"; die "linking for libgpiod v2 failed"; }
  binary=$out/replenish-agent
  [ -x "$binary" ] || die "$binary is missing after the link"
}

# make_initramfs API: busybox, /init, the modules, the agent and every library ldd lists for it.
make_initramfs() {
  local stage=$vm/initramfs-$1 library destination
  rm -rf "$stage"
  mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc,lib/modules,opt/replenish,proc,sys,dev,tmp,lib/x86_64-linux-gnu}
  cp /bin/busybox "$stage/bin/busybox"
  install -m 0755 scripts/vm/init.sh "$stage/init"
  install -D -m 0644 scripts/vm/context-switches.sh "$stage/lib/vm-test/context-switches.sh"
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

# boot_vm API: boots the VM of the API (its initramfs made by make_initramfs), its console in console-API.log
# and its VM-TEST lines on the output; the run's status and seconds in run-API.status.
boot_vm() {
  local console=$vm/console-$1.log status=0 vm_started
  vm_started=$(date +%s)
  # -nic none: the VM has no network at all.
  timeout -k 10 "$vm_timeout" qemu-system-x86_64 -accel tcg -cpu max -m 512 -nographic -no-reboot -nic none \
    -kernel "$kernel/vmlinuz" -initrd "$vm/initramfs-$1.cpio.gz" \
    -append "console=ttyS0 rdinit=/init quiet panic=-1" </dev/null 2>&1 |
    vm_console_filter | tee "$console" | { grep --line-buffered -E '^(VM-TEST|vm-test:)' || true; } | sed -u "s/^/[$1] /" ||
    status=$?
  echo "$status $(($(date +%s) - vm_started))" >"$vm/run-$1.status"
}

# check_vm API: counts the API's checks from its console.
passed=0
failed=0
check_vm() {
  local console=$vm/console-$1.log status seconds name
  read -r status seconds <"$vm/run-$1.status"
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
  echo "[$1] VM run: $seconds s; console in ${console#"$root"/}"
}

for api in "${apis[@]}"; do
  build_agent "$api"
  make_initramfs "$api"
done
# The VMs of both APIs at once: each has a chip and a console of its own, and most of a run is its idle window.
step "VM runs, libgpiod ${apis[*]} side by side (timeout $vm_timeout s each)"
vm_pids=()
for api in "${apis[@]}"; do
  rm -f "$vm/run-$api.status"
  boot_vm "$api" &
  vm_pids+=($!)
done
wait "${vm_pids[@]}"
for api in "${apis[@]}"; do check_vm "$api"; done

step "done: ${apis[*]}"
echo "vm-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
