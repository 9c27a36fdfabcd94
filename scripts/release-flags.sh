#!/usr/bin/env bash
# The build settings of the device binary, one `swift build` argument a line, in one place for every script
# that builds it (deb.sh, bench.sh and order-file.sh through lib.sh, arm64.sh, vm-boot-test.sh): `mapfile -t flags < <(bash
# scripts/release-flags.sh [ROOT])`, then `swift build -c release --static-swift-stdlib "${flags[@]}"`. ROOT is
# where the repository is as the compiler sees it (default: this checkout; arm64.sh passes its path inside
# the build chroot). Each setting was measured on its own with scripts/footprint-steps.sh (docs/benchmarks.md,
# "The footprint steps"). Measured and left out: -Osize (a smaller binary, but more resident memory and slower
# presses). The settings:
#
# - -function-sections (every Swift module, the packages' too): each function in a section of its own, so
#   that --gc-sections can drop the ones nothing calls and the ordering file below can move single functions.
#   The Swift compiler puts a whole module's code in one .text otherwise. The prebuilt standard library has a
#   section per public function already (libswiftCore.a's Swift.o: 8,062 .text sections), but 1.6 MB of it (local
#   functions, closures, specializations) stays in one plain .text, which this cannot split.
# - SwiftPM does not know that the link reads the ordering file and the two linker scripts: after one of them
#   changes, remove the binary so the next build links again (order-file.sh does).
# - lld instead of gold (the Swift driver's default on Linux): it has the two options below.
# - --no-export-dynamic: the Swift driver exports every symbol of an executable (-export-dynamic), which makes
#   each one a root that --gc-sections must keep and fills .dynsym. Nothing looks the agent's symbols up at
#   run time (the executor hooks are found through the linker: Sources/CProcess).
# - -z pack-relative-relocs: the position-independent binary's 57,000 relative relocations as a compact
#   DT_RELR table (glibc 2.36+; bookworm and trixie have it) instead of 1.4 MB of .rela.dyn that the loader
#   reads at every start.
# - --symbol-ordering-file bench/hot-symbols.txt (scripts/order-file.sh): the functions that start, pairing
#   and orders run, first in .text, so the pages the kernel maps around each fault are code that runs.
# - scripts/no-unwind-tables.ld: no .eh_frame (3.1 MB of the stripped binary). Nothing unwinds at run time:
#   Swift errors are return values, the Swift runtime and libdispatch use no C++ exceptions (the shared
#   libraries keep their own tables), and a release build's trap prints no text either way. The agent writes no
#   core file for a debugger to unwind (it would hold the tokens); a crash prints its own line, through the
#   frame pointers (Sources/CProcess/crashreport.c; docs/behaviour.md, "When the agent crashes").
# - scripts/unnamed-functions-first.ld: the helpers the Swift compiler emits without a symbol (sections `.text..L…`:
#   outlined copies and releases of values, closure-context destroyers; 37 kB), which the ordering file cannot
#   name, at the front of .text instead of scattered through it, where each one that ran made the kernel map the
#   64 kB around it.
# - --icf=all: one copy of each set of identical functions (0.6 MB; Swift's objects carry no address-significance
#   tables, so --icf=safe folds almost nothing). The ordering file still places the kept copies: lld points every
#   folded symbol at its kept copy before it orders, and the functions the ordering file names lie within the
#   same 3.8 MB at the front of .text with and without it.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
printf '%s\n' \
  -Xswiftc -Xfrontend -Xswiftc -function-sections \
  -Xswiftc -use-ld=lld \
  -Xlinker --no-export-dynamic \
  -Xlinker -z -Xlinker pack-relative-relocs \
  -Xlinker "--symbol-ordering-file=$root/bench/hot-symbols.txt" -Xlinker --no-warn-symbol-ordering \
  -Xlinker -T -Xlinker "$root/scripts/no-unwind-tables.ld" \
  -Xlinker -T -Xlinker "$root/scripts/unnamed-functions-first.ld" \
  -Xlinker --icf=all
