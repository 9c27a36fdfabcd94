#!/usr/bin/env bash
# End to end on the simulated board against the emulator: pair as the companion app would, press the
# button, show the placed order. Stops everything it started, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh
echo "== building (a first build takes about 5 minutes on 2 cores; progress every 100 steps)"
# swift build prints one line per step when not on a terminal: show every 100th, errors, and the last line.
swift build 2>&1 | awk '/^\[[0-9]+\/[0-9]+\]/ { if (++steps % 100 == 0) { print "   " $1; fflush() } next }
  /error:/ || /^Build complete/ || /^Compiling plugin|^Building for/ { print; fflush() }'
bin=$(swift build --show-bin-path)
work=$(mktemp -d /tmp/replenish-demo.XXXXXX)
pids=()
source scripts/lib.sh
trap 'stop_all; rm -rf "$work"' EXIT

echo "== starting the LWA/DRS emulator"
start_emulator
pick_pairing_port
write_config
"$bin/replenish-agent" check-config --config "$work/agent.json"
echo "== starting the agent on the simulated board"
start_agent
echo "== pairing, as the companion app would"
pair
echo "== pressing the button"
"$bin/replenish-agent" press button --config "$work/agent.json"
wait_for "the order" 30 order_placed
echo "== status"
"$bin/replenish-agent" status --config "$work/agent.json"
echo "== agent log (excerpt)"
grep -E "paired|press|order|device status" "$work/agent.log" | sed 's/^[^ ]* //' || true
"$bin/replenish-agent" status --json --config "$work/agent.json" | grep -q '"lastResult":"TEST_ORDER_PLACED"'
echo "== demo finished: TEST_ORDER_PLACED"
