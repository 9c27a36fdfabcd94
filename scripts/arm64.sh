#!/usr/bin/env bash
# The agent for the devices' own CPU: cross-builds for aarch64-unknown-linux-gnu (Debian trixie arm64, the base
# of current Raspberry Pi OS) with Debian's own Swift, and runs the unit suites under qemu-user.
#
#   scripts/arm64.sh toolchain     the cross toolchain only (below)
#   scripts/arm64.sh build         `make arm64`: the release device binary, static Swift standard library, in
#                                  .build-arm64/aarch64-unknown-linux-gnu/release/replenish-agent
#   scripts/arm64.sh build-tests   the debug build of the test bundle, and of the emulator and companion the booted arm64 device
#                                  runs, in .build-arm64-tests (no debug information: nothing debugs them)
#   scripts/arm64.sh test          build-tests, then the unit suites under qemu-aarch64 (binfmt_misc)
#   scripts/arm64.sh c-floor       the bench's C floor (bench/c-agent.c) for arm64, in .build-arm64/c-agent
#   scripts/arm64.sh swift ARGS…   any `swift` command inside the toolchain's chroot, for the arm64 SDK
#
# Why this way (measured): bookworm and trixie have no Swift; Debian sid has `swiftlang` 6.2.3 for amd64 and arm64,
# the version pinned below (`swift_version`), so every arm64 build uses the compiler the tests ran with. The host's Swift 6.3.1 cannot use the 6.2.3 arm64 runtime (its
# Dispatch and FoundationEssentials are binary modules of 6.2.3), and sid's amd64 compiler needs glibc 2.42, so
# it runs in a sid chroot. Nothing runs emulated while building:
# - .build/arm64/sid: a sid amd64 chroot (mmdebstrap minbase) with swiftlang, libc6-dev, git, pkgconf;
# - …/sid/opt/cross/runtime: the aarch64 Swift runtime, unpacked from swiftlang:arm64 and libswiftlang:arm64
#   (lib/swift, lib/swift_static, lib/clang: the .swiftmodules, swiftrt.o, every runtime library);
# - …/sid/opt/cross/sysroot-trixie: Debian trixie arm64 headers and libraries (mmdebstrap --variant=extract),
#   the libraries the agent links: libcurl (OpenSSL), libgpiod 2.x (libgpiod3), libssl;
# - …/sid/opt/cross/sdk/aarch64-trixie.artifactbundle: the Swift SDK bundle (SE-0387) that puts them together.
# Each part is remade only when its recipe (this file's lists and versions) changes; `rm -rf .build/arm64`
# starts over. The repository is bind-mounted into the chroot at its own path, inside a private mount
# namespace (unshare), so no mount outlives the command. Needs root (mmdebstrap, chroot); sudo otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/apt.sh
. scripts/cache.sh
# The commit and package version that `--version` prints (Sources/CBuildInfo/commit.h), written as the caller
# (git refuses a clone owned by another user to root) before the build runs in the chroot, which sees the
# repository through a bind mount.
case "${1:-build}" in build | build-tests | test) bash scripts/build-info.sh ;; esac
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "arm64: needs root (mmdebstrap, chroot): run it as root" >&2; exit 1; }
  exec sudo --preserve-env=PATH,HOME,REPLENISH_TEST_CACHE bash "$0" "$@"
fi
cross=$root/.build/arm64
chroot_dir=$cross/sid
opt=/opt/cross # inside the chroot
src=/src # the repository, inside the chroot: one path whatever the clone's, so one build cache serves all
scratch=$root/.build-arm64
# The debug build (the test bundle, the VM's emulator) has a scratch folder of its own: SwiftPM locks a scratch
# folder while it builds, and scripts/test.sh runs the release and the debug build side by side. (The two
# configurations share no compiled module anyway.)
scratch_tests=$root/.build-arm64-tests
# Both are links into the cache (scripts/cache.sh, cached_scratch) for the builds: the chroot sees the repository at
# /src whatever the clone's path, so SwiftPM's paths are the same in every clone and the pinned packages' modules
# of an earlier run are found. `builds` is the cache's folder of them, bind-mounted into the chroot.
builds=$cache_root/builds
release=trixie
triple=aarch64-unknown-linux-gnu
mirror=http://deb.debian.org/debian
# The archive these machines reach is a snapshot whose Release files are past their Valid-Until.
apt_options=(-o Acquire::Check-Valid-Until=false)
sysroot_packages=(libc6-dev libgcc-14-dev libstdc++-14-dev linux-libc-dev libcurl4-openssl-dev libgpiod-dev libssl-dev libavahi-client-dev)
# The Swift the device binary is built with: Debian's swiftlang at this version, for the compiler (amd64) and the
# runtime (arm64) alike. A newer one is taken by changing it here (and running the tests with it).
swift_version=6.2.3-1+b1
chroot_packages=("swiftlang=$swift_version" libc6-dev git ca-certificates pkgconf)
started=$(date +%s)
step() { echo "== arm64: $* ($(($(date +%s) - started)) s)"; }
die() {
  echo "arm64: $*" >&2
  exit 1
}

need_host_packages() { apt_install "$@" || die "could not install $*"; }

# The swiftlang versions Debian sid has now, for amd64 and arm64, one a line: an apt-get update of sid alone into a
# scratch folder (the host's own apt state untouched), then apt-cache madison.
sid_swiftlang_versions() {
  local lists
  lists=$(mktemp -d) || return 1
  mkdir -p "$lists/state/lists/partial" "$lists/cache/archives/partial"
  echo "deb [arch=amd64,arm64] $mirror sid main" >"$lists/sources.list"
  local options=("${apt_options[@]}" -o "Dir::State=$lists/state" -o "Dir::Cache=$lists/cache"
    -o "Dir::Etc::SourceList=$lists/sources.list" -o "Dir::Etc::SourceParts=-" -o "APT::Architectures::=amd64"
    -o "APT::Architectures::=arm64" -o "Dir::State::status=/dev/null")
  apt-get "${options[@]}" -qq update >/dev/null 2>&1 &&
    apt-cache "${options[@]}" madison swiftlang | awk -F'|' '{ gsub(/ /, "", $2); print "  " $2 }' | sort -u
  local status=$?
  rm -rf "$lists"
  return $status
}

# binfmt_misc: aarch64 programs (the test bundle, and the packages' scripts in the VM image) run under
# qemu-aarch64-static as if native.
binfmt() {
  need_host_packages qemu-user-static binfmt-support
  [ -e /proc/sys/fs/binfmt_misc/status ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 >/dev/null
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || die "could not register qemu-aarch64 with binfmt_misc"
}

# not_mounted DIR: dies if anything is mounted at or below DIR (a bind mount of the repository left by a killed
# command would otherwise be deleted with it).
not_mounted() {
  if awk -v dir="$1" '$2 == dir || index($2, dir "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    die "something is mounted below $1 (see /proc/self/mounts): unmount it first"
  fi
}

# fresh NAME RECIPE: 0 when the part NAME was made from RECIPE (its stamp says so).
fresh() { [ -f "$cross/$1.recipe" ] && [ "$(cat "$cross/$1.recipe")" = "$2" ]; }
stamp() { printf '%s' "$2" >"$cross/$1.recipe"; }

toolchain() {
  need_host_packages mmdebstrap
  # Nothing here yet: the cache outside the clone (scripts/cache.sh) may have it, keyed by this function's text,
  # the lists it installs and the state of sid and trixie in the archive.
  local key="" made=0
  if [ ! -d "$cross" ]; then
    key=$(cache_key "$(declare -f toolchain package_db sdk) ${chroot_packages[*]} ${sysroot_packages[*]}" \
      "deb $mirror sid main" "deb $mirror $release main") || key=""
    cache_restore arm64-toolchain "$key" "$cross" || true
  fi
  mkdir -p "$cross"
  local recipe
  recipe="sid ${chroot_packages[*]}"
  if ! fresh chroot "$recipe" || [ ! -x "$chroot_dir/usr/libexec/swift/bin/swift" ]; then
    step "sid chroot with swiftlang (mmdebstrap, about 1 min, 2.8 GB)"
    not_mounted "$chroot_dir"
    rm -rf "$chroot_dir" "$chroot_dir.tmp" "$cross"/*.recipe
    mmdebstrap --mode=root --variant=minbase --architectures=amd64,arm64 --aptopt='Acquire::Check-Valid-Until "false"' \
      --include="$(IFS=,; echo "${chroot_packages[*]}")" sid "$chroot_dir.tmp" "deb $mirror sid main" \
      >"$cross/mmdebstrap-sid.log" 2>&1 || {
      tail -n 30 "$cross/mmdebstrap-sid.log"
      if grep -q "Version '$swift_version' for 'swiftlang' was not found" "$cross/mmdebstrap-sid.log"; then
        echo "arm64: Debian sid no longer has swiftlang $swift_version. The versions it has now:" >&2
        sid_swiftlang_versions >&2 || echo "  (could not list them: apt-get update of sid failed)" >&2
        die "move the pin: set swift_version=<one of them> in scripts/arm64.sh, then run scripts/test.sh with it (docs/arm64.md, \"Moving the Swift pin\")"
      fi
      die "mmdebstrap sid failed"
    }
    # A build machine with a local store of the packages' repositories (/opt/swift-packages, GitHub's layout) has
    # SwiftPM's fetches go there; anywhere else they go to GitHub.
    if [ -d /opt/swift-packages ]; then
      chroot "$chroot_dir.tmp" git config --global url./opt/swift-packages/.insteadof https://github.com/
    fi
    chroot "$chroot_dir.tmp" git config --global --add safe.directory '*'
    mv "$chroot_dir.tmp" "$chroot_dir"
    stamp chroot "$recipe"
    made=1
  fi
  local version
  version=$(chroot "$chroot_dir" dpkg-query -W -f='${Version}' swiftlang)
  [ "$version" = "$swift_version" ] || die "the sid chroot has swiftlang $version, not the pinned $swift_version"
  recipe="swiftlang $version"
  if ! fresh runtime "$recipe"; then
    step "aarch64 Swift runtime: swiftlang:arm64 and libswiftlang:arm64 $version"
    local debs=$chroot_dir/tmp/arm64-debs
    rm -rf "$debs" "$chroot_dir$opt/runtime" && mkdir -p "$debs" "$chroot_dir$opt/runtime"
    chroot "$chroot_dir" apt-get "${apt_options[@]}" update -qq
    chroot "$chroot_dir" sh -c "cd /tmp/arm64-debs && apt-get -qq download swiftlang:arm64=$version libswiftlang:arm64=$version" \
      2>/dev/null || die "apt-get download swiftlang:arm64=$version failed"
    # Only lib/swift, lib/swift_static and lib/clang under usr/libexec/swift (1.1 GB of the 2.7 GB): the rest
    # (the arm64 compiler, lldb, sourcekit) is left out.
    for deb in "$debs"/*.deb; do
      dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$chroot_dir$opt/runtime" --wildcards --exclude='./usr/bin' \
        --exclude='./usr/share' --exclude='./usr/lib' --exclude='./usr/libexec/swift/bin' \
        --exclude='./usr/libexec/swift/libexec' --exclude='./usr/libexec/swift/share' \
        --exclude='./usr/libexec/swift/lib/lib*' --exclude='./usr/libexec/swift/lib/python*'
    done
    [ -f "$chroot_dir$opt/runtime/usr/libexec/swift/lib/swift_static/linux/aarch64/swiftrt.o" ] ||
      die "no aarch64 swiftrt.o in swiftlang:arm64 $version"
    rm -rf "$debs"
    # A test bundle autolinks _Testing_Foundation, whose library Debian does not ship: an empty one will do.
    for kind in swift swift_static; do
      ar rc "$chroot_dir$opt/runtime/usr/libexec/swift/lib/$kind/linux/lib_Testing_Foundation.a"
    done
    stamp runtime "$recipe"
    made=1
  fi
  recipe="$release ${sysroot_packages[*]} extract-hook $(declare -f package_db)"
  local sysroot=$chroot_dir$opt/sysroot-$release
  if ! fresh sysroot "$recipe"; then
    step "arm64 sysroot: Debian $release (mmdebstrap --variant=extract, no emulation)"
    rm -rf "$sysroot"
    mmdebstrap --mode=root --variant=extract --architectures=arm64 --aptopt='Acquire::Check-Valid-Until "false"' \
      --include="$(IFS=,; echo "${sysroot_packages[*]}")" --extract-hook="$(declare -f package_db); package_db \"\$1\"" \
      "$release" "$sysroot" "deb $mirror $release main" \
      >"$cross/mmdebstrap-sysroot.log" 2>&1 || { tail -n 30 "$cross/mmdebstrap-sysroot.log"; die "mmdebstrap $release failed"; }
    # --variant=extract makes no merged-/usr links; libc's linker scripts name /lib/…
    for link in lib bin sbin; do [ -e "$sysroot/$link" ] || ln -s "usr/$link" "$sysroot/$link"; done
    # clang looks for swiftrt.o and the runtime under the sysroot's usr/lib.
    ln -sfn "$opt/runtime/usr/libexec/swift/lib/swift" "$sysroot/usr/lib/swift"
    ln -sfn "$opt/runtime/usr/libexec/swift/lib/swift_static" "$sysroot/usr/lib/swift_static"
    stamp sysroot "$recipe"
    made=1
  fi
  sdk
  [ "$made" = 0 ] || cache_store_later arm64-toolchain "$key" "$cross"
}

# package_db SYSROOT: run by mmdebstrap (extract hook) while the packages are still in its apt cache. An extracted
# sysroot has no dpkg database, so this keeps what dpkg-shlibdeps reads of one: each package's status stanza,
# file list, symbols and shlibs files (under var/lib/replenish-shlibs; `shlibs-admindir` makes the database).
package_db() {
  local db=$1/var/lib/replenish-shlibs deb name control
  rm -rf "$db" && mkdir -p "$db/info"
  for deb in "$1"/var/cache/apt/archives/*.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    [ "$(dpkg-deb -f "$deb" Multi-Arch)" = same ] && name=$name:$(dpkg-deb -f "$deb" Architecture)
    dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -e 's|^\./|/|' -e 's|/$||' -e '/^$/d' >"$db/info/$name.list"
    control=$(mktemp -d)
    dpkg-deb -e "$deb" "$control"
    for file in symbols shlibs; do [ -f "$control/$file" ] && cp "$control/$file" "$db/info/$name.$file"; done
    rm -rf "$control"
    { printf 'Package: %s\nStatus: install ok installed\n' "$(dpkg-deb -f "$deb" Package)"
      dpkg-deb -f "$deb" | grep -v '^Package:'
      echo; } >>"$db/status"
  done
  [ -s "$db/status" ] || { echo "package_db: no packages in $1/var/cache/apt/archives" >&2; return 1; }
}

# shlibs_admindir: prints a dpkg database of the sysroot's packages whose file lists name the files where they
# are on this machine (dpkg-shlibdeps finds a library under the sysroot, then asks which package holds it).
shlibs_admindir() {
  local sysroot=$chroot_dir$opt/sysroot-$release db admindir=$cross/shlibs-admindir list
  db=$sysroot/var/lib/replenish-shlibs
  [ -s "$db/status" ] || die "no package database in $sysroot: run scripts/arm64.sh toolchain"
  rm -rf "$admindir" && mkdir -p "$admindir/info" "$admindir/updates" "$admindir/triggers"
  cp "$db/status" "$admindir/status"
  echo 1 >"$admindir/info/format" # the multiarch layout: info/<package>:<arch>.list
  for list in "$db"/info/*.list; do sed "s|^/|$sysroot/|" "$list" >"$admindir/info/${list##*/}"; done
  cp "$db"/info/*.symbols "$db"/info/*.shlibs "$admindir/info/" 2>/dev/null || true
  echo "$admindir"
}

# write_if_changed FILE: standard input into FILE, replaced only when it differs, and then by a rename (another
# build may be reading it: scripts/test.sh builds the test bundle while the booted device's script runs).
write_if_changed() {
  local new
  new=$(mktemp "$1.XXXXXX")
  cat >"$new"
  if cmp -s "$new" "$1"; then rm -f "$new"; else chmod 0644 "$new" && mv "$new" "$1"; fi
}

# The SDK bundle (paths as the chroot sees them).
sdk() {
  local bundle=$chroot_dir$opt/sdk/aarch64-$release.artifactbundle
  mkdir -p "$bundle/aarch64-$release"
  write_if_changed "$bundle/info.json" <<EOF
{
  "schemaVersion": "1.0",
  "artifacts": {
    "aarch64-$release": {
      "type": "swiftSDK",
      "version": "1",
      "variants": [{ "path": "aarch64-$release", "supportedTriples": ["x86_64-unknown-linux-gnu", "x86_64-pc-linux-gnu"] }]
    }
  }
}
EOF
  write_if_changed "$bundle/aarch64-$release/swift-sdk.json" <<EOF
{
  "schemaVersion": "4.0",
  "targetTriples": {
    "$triple": {
      "sdkRootPath": "$opt/sysroot-$release",
      "swiftResourcesPath": "$opt/runtime/usr/libexec/swift/lib/swift",
      "swiftStaticResourcesPath": "$opt/runtime/usr/libexec/swift/lib/swift_static",
      "toolsetPaths": ["toolset.json"]
    }
  }
}
EOF
  write_if_changed "$bundle/aarch64-$release/toolset.json" <<EOF
{
  "schemaVersion": "1.0",
  "swiftCompiler": { "extraCLIOptions": ["-use-ld=lld"] },
  "linker": { "path": "/usr/libexec/swift/bin/ld.lld" }
}
EOF
}

# in_chroot COMMAND…: runs COMMAND in the chroot, in the repository, with the repository, the Swift package
# mirror and /proc mounted in a private mount namespace (gone when the command ends).
in_chroot() {
  local pkgconfig=$opt/sysroot-$release/usr/lib/aarch64-linux-gnu/pkgconfig:$opt/sysroot-$release/usr/share/pkgconfig
  mkdir -p "$chroot_dir$src" "$chroot_dir/opt/swift-packages" "$chroot_dir/proc"
  unshare --mount --propagation private -- bash -c '
    set -e
    c=$1 root=$2 src=$3 pkgconfig=$4 sysroot=$5 builds=$6
    shift 6
    mount --bind "$root" "$c$src"
    # The builds'"'"' scratch folders in the cache (cached_scratch), at the same path as outside: .build-arm64 and
    # .build-arm64-tests are links to them.
    if [ -n "$builds" ] && [ -d "$builds" ]; then mkdir -p "$c$builds" && mount --bind "$builds" "$c$builds"; fi
    if [ -d /opt/swift-packages ]; then mount --bind /opt/swift-packages "$c/opt/swift-packages"; fi
    mount -t proc proc "$c/proc"
    exec chroot "$c" env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 PKG_CONFIG_PATH="$pkgconfig" \
      PKG_CONFIG_LIBDIR="$pkgconfig" PKG_CONFIG_SYSROOT_DIR="$sysroot" "$@"
  ' in-chroot "$chroot_dir" "$root" "$src" "$pkgconfig" "$opt/sysroot-$release" "$builds" "$@"
}

# swift_arm64 SCRATCH ARGS…: `swift ARGS…` in the chroot for the arm64 SDK, with the scratch folder SCRATCH
# (a folder of the repository, named as the chroot sees it).
swift_arm64() {
  local scratch_path=$1
  shift
  in_chroot swift "$@" --package-path "$src" --swift-sdks-path "$opt/sdk" --swift-sdk "aarch64-$release" \
    --scratch-path "$scratch_path"
}

# link_scratch DIR NAME: DIR made a link into the cache's builds (cached_scratch) for this compiler and SDK.
link_scratch() {
  cached_scratch "$1" "$2" "swiftlang $swift_version for $triple, sysroot $release" >/dev/null
}

build() {
  toolchain
  link_scratch "$scratch" release-arm64
  step "swift build -c release --static-swift-stdlib for $triple (Swift $(chroot "$chroot_dir" dpkg-query -W -f='${Version}' swiftlang))"
  local flags
  mapfile -t flags < <(bash "$root/scripts/release-flags.sh" "$src")
  swift_arm64 "$src/.build-arm64" build -c release --product replenish-agent --static-swift-stdlib "${flags[@]}" \
    --only-use-versions-from-resolved-file 2>&1 |
    grep -E 'error|warning: |Compiling|Build' | grep -v '^\[' | tail -n 5
  local binary=$scratch/$triple/release/replenish-agent
  [ -x "$binary" ] || die "no $binary"
  step "built $binary"
  need_host_packages file # not on a minimal Debian 12
  file -b "$binary" | grep -q 'ELF 64-bit LSB .*, ARM aarch64,' || die "$binary is not an aarch64 program"
  local needs has
  needs=$(readelf -V --wide "$binary" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
  has=$(dpkg-query --admindir="$(shlibs_admindir)" -W -f='${Version}' libc6:arm64)
  dpkg --compare-versions "${needs#GLIBC_}" le "${has%%-*}" ||
    die "$binary needs $needs, newer than Debian $release's glibc $has"
  echo "arm64: $(file -b "$binary" | cut -d, -f1-2); needs $needs at most (Debian $release: glibc $has)"
}

build_tests() {
  toolchain
  link_scratch "$scratch_tests" debug-arm64
  # Debian ships swift-testing only as a shared library (no Testing module in swift_static), so this build
  # links the Swift runtime dynamically: the test bundle runs with the runtime on its library path, and the
  # arm64 VM image gets the runtime's libraries for the emulator (`runtime-libraries`). The emulator is built
  # here, in debug, where it shares the modules the test bundle compiles (a release build of it, static, would
  # compile its TLS and HTTP client packages with optimisation: it cost more). No debug information: nothing
  # debugs these builds, and writing it is part of every compile.
  local product
  for product in replenish-agentPackageTests replenish-emulator replenish-companion; do
    step "swift build --product $product for $triple (debug, no debug information)"
    swift_arm64 "$src/.build-arm64-tests" build --product "$product" -debug-info-format none 2>&1 |
      grep -E 'error|Build' | grep -v '^\[' | tail -n 5
  done
  [ -x "$scratch_tests/$triple/debug/replenish-agentPackageTests.xctest" ] || die "no test bundle"
  [ -x "$scratch_tests/$triple/debug/replenish-emulator" ] || die "no emulator"
  [ -x "$scratch_tests/$triple/debug/replenish-companion" ] || die "no companion"
}

# c_floor: the bench's C floor (bench/c-agent.c) for arm64, which scripts/vm-boot-test.sh runs beside the agent in
# the booted arm64 device: the toolchain's clang and lld against the sysroot's libcurl and libgpiod 2.x (trixie's,
# the image's), stripped, in .build-arm64/c-agent.
c_floor() {
  toolchain
  link_scratch "$scratch" release-arm64
  step "bench/c-agent.c for $triple (clang -O2, lld)"
  in_chroot /usr/libexec/swift/bin/clang --target=aarch64-linux-gnu --sysroot="$opt/sysroot-$release" -fuse-ld=lld \
    -O2 -Wall -s -o "$src/.build-arm64/c-agent" "$src/bench/c-agent.c" -lcurl -lgpiod || die "building bench/c-agent.c failed"
  file -b "$scratch/c-agent" | grep -q 'ELF 64-bit LSB .*, ARM aarch64,' || die "$scratch/c-agent is not an aarch64 program"
  echo "arm64: $scratch/c-agent, $(stat -c %s "$scratch/c-agent") bytes"
}

# runtime_libraries: prints the folder of the aarch64 Swift runtime's shared libraries.
runtime_libraries() {
  local folder=$chroot_dir$opt/runtime/usr/libexec/swift/lib/swift/linux
  [ -f "$folder/libswiftCore.so" ] || die "no aarch64 Swift runtime: run scripts/arm64.sh toolchain"
  echo "$folder"
}

# The unit suites: those tagged `.unit` (scripts/unit-tests.sh --list: manual clocks, no real deadlines); the
# `.process` suites start the agent and the emulator as processes (README "Tests": x86-only, and why). The test
# bundle runs under qemu-aarch64.
unit_suites() {
  "$root"/scripts/unit-tests.sh --list
}

test_arm64() {
  build_tests
  binfmt
  local bundle=$scratch_tests/$triple/debug/replenish-agentPackageTests.xctest suites filter
  suites=$(unit_suites)
  filter=$(echo "$suites" | paste -sd'|')
  step "unit suites under qemu-aarch64: $(echo "$suites" | wc -l) suites ($(echo "$suites" | paste -sd' '))"
  [ "$(file -b "$bundle" | grep -c aarch64)" = 1 ] || die "$bundle is not an aarch64 program"
  # In the chroot, where the sources are at the path the bundle was built from (some suites read them).
  in_chroot env QEMU_LD_PREFIX="$opt/sysroot-$release" LD_LIBRARY_PATH="$opt/runtime/usr/libexec/swift/lib/swift/linux" \
    "$src/.build-arm64-tests/$triple/debug/${bundle##*/}" \
    --testing-library swift-testing --filter "^ReplenishAgentTests\.($filter)/"
  step "unit suites passed under qemu-aarch64"
}

case "${1:-build}" in
toolchain) toolchain ;;
build) build ;;
build-tests) build_tests ;;
test) test_arm64 ;;
shlibs-admindir) shlibs_admindir ;;
runtime-libraries) runtime_libraries ;;
c-floor) c_floor ;;
swift)
  shift
  toolchain
  swift_arm64 "$src/.build-arm64" "$@"
  ;;
*) die "usage: scripts/arm64.sh toolchain|build|build-tests|test|c-floor|swift ARGS…" ;;
esac
