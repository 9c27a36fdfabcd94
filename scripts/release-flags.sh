#!/usr/bin/env bash
# The build settings of the device binary, one `swift build` argument a line, in one place for every script
# that builds it (deb.sh, bench.sh and order-file.sh through lib.sh, arm64.sh, vm-boot-test.sh): `mapfile -t flags < <(bash
# scripts/release-flags.sh [ROOT])`, then `swift build -c release --static-swift-stdlib "${flags[@]}"`. ROOT is
# where the repository is as the compiler sees it (default: this checkout; arm64.sh passes its path inside
# the build chroot). Each setting was measured on its own with scripts/footprint-steps.sh (README
# "Benchmarks", issue #21). Measured and left out: -Osize (a smaller binary, but more resident memory and slower
# presses) and lld's --icf=all (1.1 MB smaller, but the kept copy of a folded function lies outside the ordered
# hot code, so more of the text is resident). The settings:
#
# - -function-sections (every Swift module, the packages' too): each function in a section of its own, so
#   that --gc-sections can drop the ones nothing calls and the ordering file below can move single functions.
#   The Swift compiler puts a whole module's code in one .text otherwise. The prebuilt standard library has a
#   section per public function already (libswiftCore.a's Swift.o: 8,062 .text sections), but 1.6 MB of it (local
#   functions, closures, specializations) stays in one plain .text, which this cannot split.
# - SwiftPM does not know that the link reads the ordering file: after it changes, remove the binary so the
#   next build links again (order-file.sh does).
# - lld instead of gold (the Swift driver's default on Linux): it has the two options below.
# - --no-export-dynamic: the Swift driver exports every symbol of an executable (-export-dynamic), which makes
#   each one a root that --gc-sections must keep and fills .dynsym. Nothing looks the agent's symbols up at
#   run time (the executor hooks are found through the linker: Sources/CProcess).
# - -z pack-relative-relocs: the position-independent binary's 57,000 relative relocations as a compact
#   DT_RELR table (glibc 2.36+; bookworm and trixie have it) instead of 1.4 MB of .rela.dyn that the loader
#   reads at every start.
# - --symbol-ordering-file bench/hot-symbols.txt (scripts/order-file.sh): the functions that start, pairing
#   and orders run, first in .text, so the pages the kernel maps around each fault are code that runs.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
printf '%s\n' \
  -Xswiftc -Xfrontend -Xswiftc -function-sections \
  -Xswiftc -use-ld=lld \
  -Xlinker --no-export-dynamic \
  -Xlinker -z -Xlinker pack-relative-relocs \
  -Xlinker "--symbol-ordering-file=$root/bench/hot-symbols.txt" -Xlinker --no-warn-symbol-ordering
