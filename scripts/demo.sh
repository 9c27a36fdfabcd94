#!/usr/bin/env bash
# End to end on the simulated board against the emulator: pair as the companion app would, press the
# button, show the placed order. Stops everything it started, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh
echo "== building"
swift build 2>&1 | tail -n 1
bin=$(swift build --show-bin-path)
work=$(mktemp -d /tmp/replenish-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.1 s, at most SECONDS.
wait_for() {
  local what=$1 limit=$2; shift 2
  for _ in $(seq $((limit * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "demo: timed out waiting for $what" >&2; return 1
}

echo "== starting the LWA/DRS emulator"
"$bin/replenish-emulator" serve --listen 127.0.0.1:0 --port-file "$work/emulator.port" --slots slot-1 \
  --access-token-lifetime 3600 >"$work/emulator.log" 2>&1 &
pids+=($!)
wait_for "the emulator" 30 test -s "$work/emulator.port"
emulator="http://127.0.0.1:$(cat "$work/emulator.port")"

# A free port for the pairing endpoints.
pairing_port=""
for port in $(shuf -i 20000-60000 -n 50); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then pairing_port=$port; break; fi
done
[ -n "$pairing_port" ] || { echo "demo: no free port" >&2; exit 1; }

cat >"$work/agent.json" <<JSON
{
  "device": { "serial": "DEMO0001", "model": "5f4f1c5e-0000-4000-8000-000000000001", "phase": "test" },
  "lwa": { "clientId": "amzn1.application-oa2-client.emulator", "tokenURL": "$emulator/auth/o2/token" },
  "drs": { "baseURL": "$emulator" },
  "stateDirectory": "$work/state",
  "board": "$root/board/simulated.json",
  "buttons": [ { "input": "button", "slot": "slot-1" } ],
  "pairing": { "listen": "127.0.0.1:$pairing_port" }
}
JSON
"$bin/replenish-agent" check-config --config "$work/agent.json"

echo "== starting the agent on the simulated board"
"$bin/replenish-agent" run --config "$work/agent.json" 2>"$work/agent.log" &
pids+=($!)
wait_for "the pairing endpoints" 30 curl -sf "http://127.0.0.1:$pairing_port/provision/deviceInfo"

echo "== pairing, as the companion app would"
"$bin/replenish-emulator" companion --device "http://127.0.0.1:$pairing_port" --lwa "$emulator"
wait_for "pairing to be stored" 10 grep -q '"paired":true' <("$bin/replenish-agent" status --json --config "$work/agent.json")

echo "== pressing the button"
"$bin/replenish-agent" press button --config "$work/agent.json"
placed() { "$bin/replenish-agent" status --json --config "$work/agent.json" | grep -q '"lastResult":"[A-Z_]*ORDER'; }
wait_for "the order" 30 placed

echo "== status"
"$bin/replenish-agent" status --config "$work/agent.json"
echo "== agent log (excerpt)"
grep -E "paired|press|order|device status" "$work/agent.log" | sed 's/^[^ ]* //' || true
"$bin/replenish-agent" status --json --config "$work/agent.json" | grep -q '"lastResult":"TEST_ORDER_PLACED"'
echo "== demo finished: TEST_ORDER_PLACED"
