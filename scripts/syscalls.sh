#!/usr/bin/env bash
# Checks the unit's SystemCallFilter= against what the agent really calls: runs the demo's flow (emulator,
# agent on the simulated board, pairing, a press, an order, a clean stop) with the agent under `strace -f -c`,
# then fails if the agent made a system call outside @system-service minus @privileged and @resources (the
# unit's filter, expanded by `systemd-analyze syscall-filter`). Uses the packaged build (.build-deb, made by
# scripts/deb.sh) and the emulator of the debug build (.build).
# Usage: scripts/syscalls.sh   (prints each syscall with its count; exit 1 on a forbidden one)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
command -v strace >/dev/null || apt-get install -y -qq strace >/dev/null
agent="$(swift build -c release --static-swift-stdlib --scratch-path .build-deb --show-bin-path)/replenish-agent"
emulator_bin="$(swift build --show-bin-path)/replenish-emulator"
[[ -x $agent && -x $emulator_bin ]] || { echo "build first: scripts/deb.sh and swift build" >&2; exit 1; }

work=$(mktemp -d /tmp/replenish-syscalls.XXXXXX)
pids=()
bin=$work/bin
mkdir -p "$bin" "$work/trace"
ln -s "$emulator_bin" "$bin/replenish-emulator"
cat >"$bin/replenish-agent" <<WRAP
#!/bin/sh
exec strace -f -qq -c -o "$work/trace/\$\$" "$agent" "\$@"
WRAP
chmod +x "$bin/replenish-agent"
source scripts/lib.sh
trap 'stop_all; rm -rf "$work"' EXIT

start_emulator
pick_pairing_port
write_config
start_agent
pair
"$bin/replenish-agent" press button --config "$work/agent.json"
wait_for "the order" 30 order_placed
# SIGTERM to the agent itself (not to strace, which would kill it), so the graceful stop is traced too.
traced=$(pgrep -P "$agent_pid")
kill -TERM "$traced"
wait "$agent_pid" || true
stop_all

# The unit's filter, expanded: @system-service without @privileged and @resources.
expand() {
  systemd-analyze syscall-filter "$1" | tail -n +2 | sed 's/^ *//; /^#/d; /^$/d' | while read -r name; do
    if [[ $name == @* ]]; then expand "$name"; else echo "$name"; fi
  done
}
expand @system-service | sort -u >"$work/allowed"
{ expand @privileged; expand @resources; } | sort -u >"$work/denied"
comm -23 "$work/allowed" "$work/denied" >"$work/filter"

# strace -c tables: the last column is the syscall; the totals line is skipped.
awk '$NF ~ /^[a-z_0-9]+$/ && $NF != "syscall" && $NF != "total" { count[$NF] += $4 } END { for (s in count) print s, count[s] }' \
  "$work"/trace/* | sort >"$work/called"
forbidden=0
while read -r name calls; do
  if grep -qx "$name" "$work/filter"; then
    printf '  %-24s %8s\n' "$name" "$calls"
  else
    printf '  %-24s %8s   NOT IN THE UNIT'"'"'S FILTER\n' "$name" "$calls"
    forbidden=$((forbidden + 1))
  fi
done <"$work/called"
echo "$(wc -l <"$work/called") distinct system calls over the agent's commands (run, press, status); $forbidden outside the filter"
[[ $forbidden -eq 0 ]]
