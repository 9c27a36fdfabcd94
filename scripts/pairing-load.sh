#!/usr/bin/env bash
# Load on the pairing port: builds, starts the emulator and the agent (unpaired, so its pairing window is
# open), and runs scripts/pairing-load.py against the real agent: CLIENTS bad clients for SECONDS seconds
# while the good companion (`replenish-emulator companion`) pairs. Stops everything it started.
#   scripts/pairing-load.sh [CLIENTS [SECONDS]]     default 1000 clients, 60 s
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
clients=${1:-1000}
seconds=${2:-60}
echo "== building"
swift build 2>&1 | tail -n 1
bin=$(swift build --show-bin-path)
work=$(mktemp -d /tmp/replenish-load.XXXXXX)
pids=()
source scripts/lib.sh
trap 'stop_all; rm -rf "$work"' EXIT

start_emulator
pick_pairing_port
write_config
start_agent
echo "== $clients bad clients for $seconds s against the pairing port 127.0.0.1:$pairing_port"
status=0
python3 scripts/pairing-load.py --port "$pairing_port" --lwa "$emulator" --companion "$bin/replenish-emulator" \
  --agent-pid "$agent_pid" --clients "$clients" --seconds "$seconds" || status=$?
wait_for "pairing to be stored" 10 paired || status=1
kill -0 "$agent_pid" || { echo "the agent is gone" >&2; status=1; }
exit $status
