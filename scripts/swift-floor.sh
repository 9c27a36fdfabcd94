#!/usr/bin/env bash
# The Swift floor (issue #32): what the device binary's required packages cost before any of the agent's own
# code, beside the agent and the C floor, in one run. It answers "how far down can the agent's footprint go
# while it keeps these libraries?": a goal below the Swift floor needs a library gone, not a better agent.
#
# Usage: scripts/swift-floor.sh [STARTS]   (default 20). Builds, with the device's settings
# (scripts/release-flags.sh, static Swift standard library):
# - the agent (as scripts/bench.sh does, in .build-deb);
# - bench/swift-floor: ArgumentParser, swift-log, SwiftNIO's HTTP/1 server, a swift-service-lifecycle group,
#   libcurl set up and libgpiod linked; it serves 404s on loopback, says READY=1 and waits (in .build-floor);
# - the same with ArgumentParser's one Foundation file replaced (what upstream pull request #932, a package trait,
#   would do: error texts through `String(describing:)`, no `--experimental-dump-help` JSON), so that nothing
#   links FoundationEssentials (in .build-floor-nf; the agent's own JSON still would);
# - the agent with that same ArgumentParser (in .build-floor-agent-nf): its own JSON still on FoundationEssentials;
# - the C floor, bench/c-agent.c (`cc -O2`).
# Then, for each: the stripped size; resident memory 1 s after READY=1, idle (VmRSS, RssAnon, RssFile, and the
# resident part of the executable's code mapping); exec → READY=1, median of STARTS starts (bench/driver.py);
# and the functions of FoundationEssentials and what it brings (_FoundationCollections, the regex engine
# _RegexParser and _StringProcessing), from scripts/code-by-module.sh. The agent runs unpaired on the simulated
# board, serving its pairing endpoints: the same work as the floor's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
starts=${1:-20}
scripts/install-deps.sh
scratch=$(readlink -m "${DEB_SCRATCH:-$root/.build-deb}") # deb.sh's folder, a link into the cache
source scripts/lib.sh
work=$(mktemp -d /tmp/swift-floor.XXXXXX)
pids=()
trap 'stop_all; rm -rf "$work"' EXIT
echo "== building the agent"
build_release
mapfile -t flags < <(bash scripts/release-flags.sh)
[ -f Package.resolved ] && cp Package.resolved bench/swift-floor/Package.resolved
echo "== building the Swift floor"
(cd bench/swift-floor && swift build -c release --static-swift-stdlib --scratch-path "$root/.build-floor" \
  "${flags[@]}" 2>&1 | tail -n 1)
cp "$root/.build-floor/release/swift-floor" "$work/swift-floor"

echo "== building the Swift floor with ArgumentParser without Foundation"
mkdir -p "$work/nf"
cp -a "$root/.build-floor/checkouts/swift-argument-parser" "$work/nf/swift-argument-parser"
cat >"$work/nf/swift-argument-parser/Sources/ArgumentParser/Utilities/Foundation.swift" <<'SWIFT'
extension Error {
  func describe() -> String { String(describing: self) }
}

enum JSONEncoder {
  static func encode<T: Encodable>(_ value: T) -> String { "" }
}
SWIFT
# build_against_copy DIR SCRATCH SWIFT_BUILD_ARGS…: the package in DIR (a copy) built with its swift-argument-parser
# dependency pointed at the copy above, in SCRATCH.
build_against_copy() {
  local dir=$1 scratch_path=$2
  shift 2
  # The agent's resolved versions, so that the copy builds what the device build does.
  if [ -f "$root/Package.resolved" ]; then cp "$root/Package.resolved" "$dir/"; fi
  sed -i "s|.package(url: \"https://github.com/apple/swift-argument-parser\", from: \"[^\"]*\")|.package(path: \"$work/nf/swift-argument-parser\")|" \
    "$dir/Package.swift"
  grep -q "$work/nf/swift-argument-parser" "$dir/Package.swift" || { echo "could not point $dir at the copy" >&2; return 1; }
  (cd "$dir" && swift build -c release --static-swift-stdlib --scratch-path "$scratch_path" "$@" "${flags[@]}" 2>&1 |
    tail -n 1)
}
mkdir -p "$work/nf/floor"
cp -a bench/swift-floor/Package.swift bench/swift-floor/Sources "$work/nf/floor/"
build_against_copy "$work/nf/floor" "$root/.build-floor-nf"
cp "$root/.build-floor-nf/release/swift-floor" "$work/swift-floor-nf"

echo "== building the agent with ArgumentParser without Foundation"
mkdir -p "$work/nf/agent"
cp -a Package.swift Sources Tests "$work/nf/agent/"
build_against_copy "$work/nf/agent" "$root/.build-floor-agent-nf" --product replenish-agent
cp "$root/.build-floor-agent-nf/release/replenish-agent" "$work/agent-nf"

cc -O2 -Wall -o "$work/c-agent" bench/c-agent.c -lcurl -lgpiod

# The agent, unpaired (nothing answers at the DRS and LWA addresses: it never calls them unpaired).
emulator=http://127.0.0.1:9
pick_pairing_port
write_config "$root/board/simulated.json"
mkfifo "$work/line"
mkdir -m 0700 "$work/c-state"
echo x >"$work/token"

driver() { python3 "$root/bench/driver.py" "$@"; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
foundation_mb() {
  scripts/code-by-module.sh "$1" | awk '$3 ~ /^(FoundationEssentials|_FoundationCollections|_RegexParser|_StringProcessing)$/ {sum += $1}
    END {printf "%.2f", sum}'
}
echo
echo "| program | stripped binary (bytes) | RSS (kB) | anonymous | file-backed | resident code of the binary | exec → READY=1 median (ms) | FoundationEssentials and what it brings (MB of functions) |"
echo "|---|---|---|---|---|---|---|---|"
measure() {
  local name=$1 unstripped=$2 modules=$3
  shift 3
  strip -o "$work/stripped" "$unstripped"
  local resident ready
  resident=$(driver footprint -- "$@")
  ready=$(driver ready --count "$starts" -- "$@")
  echo "| $name | $(stat -c %s "$work/stripped") | $(field "$resident" rss) | $(field "$resident" anon) |" \
    "$(field "$resident" file) | $(field "$resident" code) | $(field "$ready" median) | $modules |"
}
measure "the agent (unpaired, serving pairing)" "$bin/replenish-agent" "$(foundation_mb "$bin/replenish-agent")" \
  "$bin/replenish-agent" run --config "$work/agent.json"
measure "the agent (unpaired), ArgumentParser without Foundation" "$work/agent-nf" "$(foundation_mb "$work/agent-nf")" \
  "$work/agent-nf" run --config "$work/agent.json"
measure "Swift floor" "$work/swift-floor" "$(foundation_mb "$work/swift-floor")" "$work/swift-floor"
measure "Swift floor, ArgumentParser without Foundation" "$work/swift-floor-nf" "$(foundation_mb "$work/swift-floor-nf")" \
  "$work/swift-floor-nf"
measure "C floor (bench/c-agent.c)" "$work/c-agent" "0" \
  "$work/c-agent" "$work/line" "$work/c-state" "$emulator/replenish/slot-2" "$work/token" 5
echo
echo "(x86_64, $(uname -r); exec → READY=1 over $starts starts each; resident figures 1 s after READY=1)"
# What the agent runs, by size: the functions of the ordering file (scripts/order-file.sh) that the binary defines.
nm -S --defined-only "$bin/replenish-agent" | python3 -c '
import sys
hot = set(line.strip() for line in open(sys.argv[1]) if line.strip())
sizes = {}
for line in sys.stdin:
    fields = line.split()
    if len(fields) == 4 and fields[2] in "tTwW" and fields[3] in hot:
        sizes[fields[3]] = int(fields[1], 16)
print(f"the functions the agent runs (bench/hot-symbols.txt): {len(sizes)}, {sum(sizes.values()) / 1e6:.2f} MB")
' bench/hot-symbols.txt
