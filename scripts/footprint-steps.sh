#!/usr/bin/env bash
# What each build setting of scripts/release-flags.sh buys, one step at a time (README "Benchmarks", issue #21):
# links the device binary in each variant from the same compiled objects, then measures every variant with
# scripts/bench.sh (AGENT_BIN=…, the same emulator and C floor) and prints one table.
#
# Usage: scripts/footprint-steps.sh [IDLE [ORDERS [PRESSES [STARTS]]]]   (default 2 2000 300 10; about 25 min:
# three release builds of every module, then one bench run per variant)
#
# The variants, each adding to the one before it unless it says otherwise:
#   swiftpm       SwiftPM's own release link: gold, -export-dynamic, --gc-sections (the build before #21)
#   no-export     + --no-export-dynamic
#   lld           + lld instead of gold
#   relr          + -z pack-relative-relocs
#   fsections     + every Swift module compiled with -function-sections
#   ordered       + --symbol-ordering-file bench/hot-symbols.txt         (= scripts/release-flags.sh)
#   osize         ordered, every module compiled with -Osize instead of -O (tried, left out)
#   icf           ordered + --icf=all (tried, left out)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bench_args=("${1:-2}" "${2:-2000}" "${3:-300}" "${4:-10}")
steps=$root/.build-steps
out=$steps/variants
mkdir -p "$out"

# build NAME SWIFTC_FLAGS…: every module of the agent compiled in release with those flags, in its own scratch
# folder; prints the folder with the objects and SwiftPM's list of them.
build() {
  local name=$1 flags=() flag
  shift
  for flag in "$@"; do flags+=(-Xswiftc "$flag"); done
  # Called in $( ): errexit is off there, so a failed build must return its failure itself.
  swift build -c release --product replenish-agent --static-swift-stdlib --scratch-path "$steps/$name" \
    "${flags[@]}" 2>&1 | tail -n 1 >&2 || return 1
  echo "$steps/$name/x86_64-unknown-linux-gnu/release"
}

# link OBJECTS NAME LINKER_FLAGS…: SwiftPM's link command for the product (the same objects, libraries and
# driver options), plus the given flags.
link() {
  local objects=$1 name=$2
  shift 2
  rm -f "$out/$name" # a failed link must not leave the previous run's binary to be measured
  swiftc -L/usr/lib/x86_64-linux-gnu -lcrypto -L "$objects" -o "$out/$name" -module-name replenish_agent \
    -static-stdlib -emit-executable -Xlinker --gc-sections -Xlinker --defsym -Xlinker main=ReplenishAgent_main \
    -Xlinker '-rpath=$ORIGIN' "@$objects/replenish-agent.product/Objects.LinkFileList" \
    -target x86_64-unknown-linux-gnu -lgpiod -lcurl "$@" 2>&1 | { grep -v "mktemp\|createTemporaryFile" >&2 || true; }
  test -x "$out/$name" || { echo "link of $name failed" >&2; return 1; }
}

plain=$(build plain) || exit 1
sections=$(build fsections -Xfrontend -function-sections) || exit 1
small=$(build osize -Osize -Xfrontend -function-sections) || exit 1
lld=(-use-ld=lld -Xlinker --no-export-dynamic)
relr=(-Xlinker -z -Xlinker pack-relative-relocs)
ordered=(-Xlinker "--symbol-ordering-file=$root/bench/hot-symbols.txt" -Xlinker --no-warn-symbol-ordering)
link "$plain" swiftpm
link "$plain" no-export -Xlinker --no-export-dynamic
link "$plain" lld "${lld[@]}"
link "$plain" relr "${lld[@]}" "${relr[@]}"
link "$sections" fsections "${lld[@]}" "${relr[@]}"
link "$sections" ordered "${lld[@]}" "${relr[@]}" "${ordered[@]}"
link "$small" osize "${lld[@]}" "${relr[@]}" "${ordered[@]}"
link "$sections" icf "${lld[@]}" "${relr[@]}" "${ordered[@]}" -Xlinker --icf=all

echo "| variant | stripped binary (bytes) | RSS after ${bench_args[1]} orders (C floor) | anonymous RSS (C floor) | exec → READY=1 median (C floor) | press → request p50 (C floor) |"
echo "|---|---|---|---|---|---|"
for name in swiftpm no-export lld relr fsections ordered osize icf; do
  strip -o "$out/$name.stripped" "$out/$name"
  AGENT_BIN=$out/$name scripts/bench.sh "${bench_args[@]}" >"$out/$name.bench" 2>&1 ||
    { echo "bench of $name failed:" >&2; tail -n 20 "$out/$name.bench" >&2; exit 1; }
  cell() { grep -F "| $1" "$out/$name.bench" | head -n 1 | awk -F' [|] ' '{printf "%s (%s)", $2, $3}'; }
  echo "| $name | $(stat -c %s "$out/$name.stripped") | $(cell "RSS after ${bench_args[1]} orders") | $(cell "anonymous RSS") | $(cell "exec → READY=1") | $(cell "press → request at the emulator, p50") |"
done
echo
echo "machine: $(nproc) cores, $(uname -m), kernel $(uname -r); scripts/bench.sh ${bench_args[*]} per variant at commit $(git rev-parse --short HEAD)"
