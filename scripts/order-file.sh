#!/usr/bin/env bash
# Writes bench/hot-symbols.txt: the functions the device binary runs when it starts, pairs and places orders,
# one symbol a line, in the order they first ran. The device build's settings (scripts/release-flags.sh) hand it to lld as
# `--symbol-ordering-file`, so that the code that runs lies together at the front of .text and the kernel's
# fault-around (64 kB around each page fault of a file mapping) pages in that code instead of cold code that
# happens to sit next to it.
#
# Usage: scripts/order-file.sh [ORDERS]   (default 20; about 3 min: the agent runs under valgrind)
#
# How: the release agent (the build bench.sh measures, .build-deb) runs under valgrind's callgrind on the
# bench board against the emulator: start, pairing through the companion, ORDERS presses through the control
# socket (bench/driver.py, one order each), the first follow-up, a `status` over the socket, then SIGTERM.
# Every function callgrind saw run (its `fn=` records, names not demangled) goes into the file, in the order
# of callgrind's records, which follow first execution closely enough for a layout. Rerun it after a change
# that moves code on the start or order path; symbols that no longer exist are skipped by the linker.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
orders=${1:-20}
source scripts/apt.sh
apt_install valgrind python3
scratch=$(readlink -m "${DEB_SCRATCH:-$root/.build-deb}") # deb.sh's folder, a link into the cache
source scripts/lib.sh
build_release
work=$(mktemp -d /tmp/replenish-order-file.XXXXXX)
pids=()
trap 'stop_all; rm -rf "$work"' EXIT

start_emulator --access-token-lifetime 86400
pick_pairing_port
write_config "$root/bench/board.json" 0 ORDERFILE1
# Symbols without DWARF: Debian 12's valgrind cannot read the DWARF 5 the Swift compiler writes.
strip --strip-debug -o "$work/replenish-agent" "$bin/replenish-agent"
valgrind --tool=callgrind --demangle=no --compress-strings=no --dump-instr=no \
  --callgrind-out-file="$work/callgrind.out" \
  "$work/replenish-agent" run --config "$work/agent.json" 2>"$work/agent.log" &
agent_pid=$!
pids+=($agent_pid)
wait_for "the pairing endpoints (under valgrind)" 120 curl -s -o /dev/null "http://127.0.0.1:$pairing_port/"
"$bin/replenish-emulator" companion --device "http://127.0.0.1:$pairing_port" --lwa "$emulator"
wait_for "pairing to be stored" 60 paired
python3 bench/driver.py presses --target agent --emulator "$emulator" --slot slot-1 --state "$work/state" \
  --control "$work/state/control.sock" --count "$orders" --hold-ms 10 >"$work/presses.json"
"$bin/replenish-agent" status --config "$work/agent.json" >/dev/null
kill -TERM "$agent_pid"
wait "$agent_pid" || true
pids=("${pids[0]}")

# fn= records name each function with cost once per object; keep the first sighting of each.
awk '/^fn=/ { name = substr($0, 4); sub(/^\([0-9]+\) /, "", name); if (!(name in seen)) { seen[name] = 1; print name } }' \
  "$work/callgrind.out" | { grep -v '^0x' || true; } >"$work/hot-symbols.txt"
test -s "$work/hot-symbols.txt" || { echo "callgrind recorded no functions" >&2; exit 1; }
# lld moves every section that defines a listed name. A local name that many objects define (`objectdestroyTm`,
# a value witness such as `$sSnwxx`) would drag along each of them, including whole modules compiled as one
# section (the regex engine's, Foundation's prebuilt objects), so names defined more than once are left out.
nm --defined-only "$work/replenish-agent" | awk 'NF == 3 {print $3}' | sort | uniq -d >"$work/repeated.txt"
grep -vxF -f "$work/repeated.txt" "$work/hot-symbols.txt" >"$work/hot-unique.txt" || true
mv "$work/hot-unique.txt" "$work/hot-symbols.txt"
mv "$work/hot-symbols.txt" bench/hot-symbols.txt
# SwiftPM does not know the link reads this file: the next build must link again.
rm -f "$bin/replenish-agent"
echo "bench/hot-symbols.txt: $(wc -l <bench/hot-symbols.txt) functions ($orders orders: $(python3 -c "import json; print(json.load(open('$work/presses.json'))['placed'])") placed)"
