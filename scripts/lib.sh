# Shared by demo.sh, bench.sh, order-file.sh, program-cost.sh and wifi-setup-cost.sh: build the release binaries, start the emulator and the agent on the
# simulated board, pair them. Expects $bin (the folder with both binaries; build_release sets it), $root (the
# repository), $scratch (build_release's scratch folder) and $work (a private temp folder); appends what it starts to
# the array `pids`; `stop_all` stops them.

# build_release: the agent and the emulator in release, static Swift standard library, with the device's build
# settings (scripts/release-flags.sh), in $scratch: both with the same flags, or each build would recompile the
# modules the other compiled. Sets $bin to their folder.
build_release() {
  local flags product
  mapfile -t flags < <(bash "$root/scripts/release-flags.sh")
  for product in replenish-agent replenish-emulator; do
    swift build -c release --product "$product" --static-swift-stdlib --scratch-path "$scratch" "${flags[@]}" 2>&1 |
      tail -n 1
  done
  bin=$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)
}

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.1 s, at most SECONDS.
wait_for() {
  local what=$1 limit=$2; shift 2
  for _ in $(seq $((limit * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timed out waiting for $what" >&2; return 1
}

stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

start_emulator() {
  "$bin/replenish-emulator" serve --listen 127.0.0.1:0 --port-file "$work/emulator.port" --slots slot-1 "$@" \
    >"$work/emulator.log" 2>&1 &
  pids+=($!)
  wait_for "the emulator" 30 test -s "$work/emulator.port"
  emulator="http://127.0.0.1:$(cat "$work/emulator.port")"
}

# Picks a free loopback port for the pairing endpoints into $pairing_port.
pick_pairing_port() {
  pairing_port=""
  for port in $(shuf -i 20000-60000 -n 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then pairing_port=$port; return 0; fi
  done
  echo "no free port" >&2; return 1
}

# write_config [BOARD [COOLDOWN_SECONDS [SERIAL]]]: the agent's config against $emulator, in $work/agent.json
# (board/simulated.json, the default cooldown, serial DEMO0001 unless given).
write_config() {
  local board=${1:-$root/board/simulated.json} cooldown="" serial=${3:-DEMO0001}
  [ -n "${2:-}" ] && cooldown=", \"cooldownSeconds\": $2"
  cat >"$work/agent.json" <<JSON
{
  "device": { "serial": "$serial", "model": "5f4f1c5e-0000-4000-8000-000000000001", "phase": "test" },
  "lwa": { "clientId": "amzn1.application-oa2-client.emulator", "tokenURL": "$emulator/auth/o2/token" },
  "drs": { "baseURL": "$emulator" },
  "stateDirectory": "$work/state",
  "board": "$board",
  "buttons": [ { "input": "button", "slot": "slot-1"$cooldown } ],
  "pairing": { "listen": "127.0.0.1:$pairing_port" }
}
JSON
}

# write_idle_config FILE NAME [PAIRING_EXTRA [TOP_EXTRA]]: a DRS unit's config whose servers are a closed port
# (127.0.0.1:9), so it starts unpaired and stays idle, on the bench board, its state in $work/state-NAME and
# $work/run-NAME; PAIRING_EXTRA and TOP_EXTRA are added to the pairing object and to the top level (program-cost.sh,
# wifi-setup-cost.sh).
write_idle_config() {
  cat >"$1" <<JSON
{
  "device": { "serial": "READY0001", "model": "5f4f1c5e-0000-4000-8000-000000000001", "phase": "test" },
  "lwa": { "clientId": "amzn1.application-oa2-client.emulator", "tokenURL": "http://127.0.0.1:9/auth/o2/token" },
  "drs": { "baseURL": "http://127.0.0.1:9" },
  "stateDirectory": "$work/state-$2",
  "runtimeDirectory": "$work/run-$2",
  "board": "$root/bench/board.json",
  "buttons": [ { "input": "button", "slot": "slot-1" } ],
  "pairing": { "listen": "127.0.0.1:18642"${3:-} }${4:-}
}
JSON
}

# start_agent: $agent_cmd when the caller set it (bench.sh: AGENT_BIN, AGENT_PRELOAD), else the build's agent.
start_agent() {
  "${agent_cmd[@]:-$bin/replenish-agent}" run --config "$work/agent.json" 2>"$work/agent.log" &
  agent_pid=$!
  pids+=($agent_pid)
  # Any answer will do (404 for /): probing deviceInfo would start a rate-limited pairing session.
  wait_for "the pairing endpoints" 30 curl -s -o /dev/null "http://127.0.0.1:$pairing_port/"
}

pair() {
  "$bin/replenish-emulator" companion --device "http://127.0.0.1:$pairing_port" --lwa "$emulator"
  wait_for "pairing to be stored" 10 paired
}

paired() {
  "$bin/replenish-agent" status --json --config "$work/agent.json" | grep -q '"paired":true'
}

order_placed() {
  "$bin/replenish-agent" status --json --config "$work/agent.json" | grep -q '"lastResult":"[A-Z_]*ORDER'
}
