#!/usr/bin/env bash
# Footprint and idle-cost figures of the release device binary, printed as one table:
# binary size, shared libraries it needs, peak and idle RSS of a paired agent on the simulated board after
# one order, and its context switches over an idle period. Usage: scripts/bench.sh [IDLE_SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
idle=${1:-60}
scripts/install-deps.sh
swift build -c release --product replenish-agent 2>&1 | tail -n 1
swift build -c release --product replenish-emulator 2>&1 | tail -n 1
bin=$(swift build -c release --show-bin-path)
work=$(mktemp -d /tmp/replenish-bench.XXXXXX)
pids=()
source scripts/lib.sh
trap 'stop_all; rm -rf "$work"' EXIT

start_emulator
pick_pairing_port
write_config
start_agent
pair
"$bin/replenish-agent" press button --config "$work/agent.json" >/dev/null
wait_for "the order" 30 order_placed
sleep 2  # let the post-order writes and the duties finish before measuring idle
# Per-thread switch counts ("tid count name/wchan"); threads that come and go are counted by what they did
# meanwhile.
switches() {
  for task in /proc/"$agent_pid"/task/*; do
    echo "${task##*/} $(awk '/ctxt_switches/ {sum += $2} END {print sum}' "$task/status" 2>/dev/null || echo 0)" \
      "$(tr ' ' _ <"$task/comm" 2>/dev/null)/$(cat "$task/wchan" 2>/dev/null)"
  done
}
switches >"$work/switches.before"
sleep "$idle"
switches >"$work/switches.after"
idle_switches=$(awk 'NR == FNR {before[$1] = $2; next} {sum += $2 - (($1 in before) ? before[$1] : 0)} END {print sum}' \
  "$work/switches.before" "$work/switches.after")
strip -o "$work/replenish-agent.stripped" "$bin/replenish-agent"
status=/proc/$agent_pid/status
printf '%-44s %s\n' "figure" "value"
printf '%-44s %s\n' "release binary size (replenish-agent)" "$(du -h "$bin/replenish-agent" | cut -f1) ($(stat -c %s "$bin/replenish-agent") bytes)"
printf '%-44s %s\n' "release binary size, stripped" "$(du -h "$work/replenish-agent.stripped" | cut -f1) ($(stat -c %s "$work/replenish-agent.stripped") bytes)"
printf '%-44s %s\n' "Foundation/ICU libraries linked" "$(ldd "$bin/replenish-agent" | grep -ciE 'libFoundation\.so|FoundationNetworking|FoundationInternationalization|icu' || true)"
printf '%-44s %s\n' "peak RSS, paired agent after one order" "$(awk '/VmHWM/ {print $2, $3}' "$status")"
printf '%-44s %s\n' "RSS when idle" "$(awk '/VmRSS/ {print $2, $3}' "$status")"
printf '%-44s %s\n' "threads" "$(awk '/Threads/ {print $2}' "$status")"
printf '%-44s %s\n' "context switches in ${idle} s idle (all threads)" "$idle_switches"
printf '%-44s %s\n' "context switches per idle minute" "$((idle_switches * 60 / idle))"
# Which threads woke: the GPIO side should be absent from this list or show 0.
awk 'NR == FNR {before[$1] = $2; next} {printf "  thread %-38s %d\n", $3 "(" $1 ")", $2 - (($1 in before) ? before[$1] : 0)}' \
  "$work/switches.before" "$work/switches.after"
