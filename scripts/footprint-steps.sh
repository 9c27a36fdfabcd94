#!/usr/bin/env bash
# What each build setting of scripts/release-flags.sh buys, one step at a time (docs/benchmarks.md): links the
# device binary in each variant from the same compiled objects, then measures every variant with
# scripts/bench.sh (AGENT_BIN=…, the same emulator and C floor) and prints one table.
#
# Usage: scripts/footprint-steps.sh [IDLE [ORDERS [PRESSES [STARTS]]]]   (default 2 2000 300 10; about 35 min:
# three release builds of every module, then one bench run per variant). STEPS="ordered no-unwind icf" measures
# only those variants (and builds only the objects they need).
#
# The variants, each adding to the one before it unless it says otherwise:
#   swiftpm       SwiftPM's own release link: gold, -export-dynamic, --gc-sections
#   no-export     + --no-export-dynamic
#   lld           + lld instead of gold
#   relr          + -z pack-relative-relocs
#   fsections     + every Swift module compiled with -function-sections
#   ordered       + --symbol-ordering-file bench/hot-symbols.txt
#   no-unwind     + no .eh_frame (scripts/no-unwind-tables.ld)
#   icf           + --icf=all
#   unnamed-first + the functions without a symbol (.text..L…) first in .text (scripts/unnamed-functions-first.ld)
#                                                                             (= scripts/release-flags.sh)
#   osize         unnamed-first, every module compiled with -Osize instead of -O (tried, left out)
#   text-advice   unnamed-first, its text mapping given madvise(MADV_RANDOM) before main (bench/text-advice.c, preloaded;
#                 tried, left out)
#
# Then the kernel's fault-around on the binary's own file, with and without madvise(MADV_RANDOM)
# (bench/fault-around.c): how much of a file mapping one page fault makes resident.
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

all_steps="swiftpm no-export lld relr fsections ordered no-unwind icf unnamed-first osize text-advice"
read -r -a chosen <<<"${STEPS:-$all_steps}"
for name in "${chosen[@]}"; do
  [[ " $all_steps " == *" $name "* ]] || { echo "no variant $name (the variants: $all_steps)" >&2; exit 2; }
done
wants() { local name; for name in "$@"; do [[ " ${chosen[*]} " == *" $name "* ]] && return 0; done; return 1; }
if wants swiftpm no-export lld relr; then plain=$(build plain) || exit 1; fi
if wants fsections ordered no-unwind icf unnamed-first text-advice; then sections=$(build fsections -Xfrontend -function-sections) || exit 1; fi
if wants osize; then small=$(build osize -Osize -Xfrontend -function-sections) || exit 1; fi
lld=(-use-ld=lld -Xlinker --no-export-dynamic)
relr=(-Xlinker -z -Xlinker pack-relative-relocs)
ordered=(-Xlinker "--symbol-ordering-file=$root/bench/hot-symbols.txt" -Xlinker --no-warn-symbol-ordering)
no_unwind=(-Xlinker -T -Xlinker "$root/scripts/no-unwind-tables.ld")
unnamed_first=(-Xlinker -T -Xlinker "$root/scripts/unnamed-functions-first.ld")
if wants swiftpm; then link "$plain" swiftpm; fi
if wants no-export; then link "$plain" no-export -Xlinker --no-export-dynamic; fi
if wants lld; then link "$plain" lld "${lld[@]}"; fi
if wants relr; then link "$plain" relr "${lld[@]}" "${relr[@]}"; fi
if wants fsections; then link "$sections" fsections "${lld[@]}" "${relr[@]}"; fi
if wants ordered; then link "$sections" ordered "${lld[@]}" "${relr[@]}" "${ordered[@]}"; fi
if wants no-unwind; then link "$sections" no-unwind "${lld[@]}" "${relr[@]}" "${ordered[@]}" "${no_unwind[@]}"; fi
if wants icf; then
  link "$sections" icf "${lld[@]}" "${relr[@]}" "${ordered[@]}" "${no_unwind[@]}" -Xlinker --icf=all
fi
if wants unnamed-first text-advice; then
  link "$sections" unnamed-first "${lld[@]}" "${relr[@]}" "${ordered[@]}" "${no_unwind[@]}" "${unnamed_first[@]}" \
    -Xlinker --icf=all
fi
if wants text-advice; then
  # The unnamed-first binary itself, started with bench/text-advice.c preloaded.
  ln -f "$out/unnamed-first" "$out/text-advice"
  cc -O2 -Wall -shared -fPIC -o "$out/text-advice.so" bench/text-advice.c
fi
if wants osize; then
  link "$small" osize "${lld[@]}" "${relr[@]}" "${ordered[@]}" "${no_unwind[@]}" "${unnamed_first[@]}" -Xlinker --icf=all
fi

echo "| variant | stripped binary (bytes) | RSS after ${bench_args[1]} orders (C floor) | anonymous RSS (C floor) | file-backed RSS (C floor) | resident code of the binary | exec → READY=1 median (C floor) | press → request p50 (C floor) |"
echo "|---|---|---|---|---|---|---|---|"
for name in "${chosen[@]}"; do
  strip -o "$out/$name.stripped" "$out/$name"
  preload=""
  [ "$name" = text-advice ] && preload=$out/text-advice.so
  AGENT_BIN=$out/$name AGENT_PRELOAD=$preload scripts/bench.sh "${bench_args[@]}" >"$out/$name.bench" 2>&1 ||
    { echo "bench of $name failed:" >&2; tail -n 20 "$out/$name.bench" >&2; exit 1; }
  cell() { grep -F "| $1" "$out/$name.bench" | head -n 1 | awk -F' [|] ' '{printf "%s (%s)", $2, $3}'; }
  code=$(awk '/^  r-xp: / {print $2 " kB"; exit}' "$out/$name.bench")
  echo "| $name | $(stat -c %s "$out/$name.stripped") | $(cell "RSS after ${bench_args[1]} orders") | $(cell "anonymous RSS") | $(cell "file-backed RSS") | ${code:--} | $(cell "exec → READY=1") | $(cell "press → request at the emulator, p50") |"
done
echo
# The kernel's fault-around, on a copy of the last variant measured that is not in the page cache yet (written with
# O_DIRECT), touched one byte every MiB: what each fault made resident, with the default advice and with
# MADV_RANDOM.
cc -O2 -Wall -o "$out/fault-around" bench/fault-around.c
for advice in normal random; do
  dd if="$out/${chosen[-1]}.stripped" of="$out/fault-around.file" bs=1M oflag=direct status=none
  "$out/fault-around" "$out/fault-around.file" "$advice"
done
rm -f "$out/fault-around.file"
echo
echo "machine: $(nproc) cores, $(uname -m), kernel $(uname -r); scripts/bench.sh ${bench_args[*]} per variant at commit $(git rev-parse --short HEAD)"
