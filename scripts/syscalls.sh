#!/usr/bin/env bash
# Checks the unit's SystemCallFilter= against what the agent really calls: runs the demo's flow (emulator,
# agent on the simulated board, pairing, a press, an order, a clean stop) with the agent under `strace -f`,
# then fails if the agent made a system call outside @system-service minus @privileged (the unit's
# filter, expanded by `systemd-analyze syscall-filter`). Uses the packaged build (.build-deb, made by
# scripts/deb.sh) and the emulator of the debug build (.build).
# Usage: scripts/syscalls.sh   (prints each syscall with its count; exit 1 on a forbidden one or a W+X mapping)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/apt.sh
apt_need_commands strace=strace
agent="$(swift build -c release --static-swift-stdlib --scratch-path "$(readlink -f .build-deb)" --show-bin-path)/replenish-agent"
emulator_bin="$(. scripts/cache.sh && swift build --scratch-path "$(tests_scratch)" --show-bin-path)/replenish-emulator"
[[ -x $agent && -x $emulator_bin ]] || { echo "build first: scripts/deb.sh and swift build" >&2; exit 1; }

work=$(mktemp -d /tmp/replenish-syscalls.XXXXXX)
pids=()
bin=$work/bin
mkdir -p "$bin" "$work/trace"
ln -s "$emulator_bin" "$bin/replenish-emulator"
cat >"$bin/replenish-agent" <<WRAP
#!/bin/sh
exec strace -f -qq -o "$work/trace/\$\$" "$agent" "\$@"
WRAP
chmod +x "$bin/replenish-agent"
source scripts/lib.sh
trap 'stop_all; rm -rf "$work"' EXIT

start_emulator
pick_pairing_port
write_config
"$bin/replenish-agent" check-config --config "$work/agent.json"   # the unit's ExecCondition=
start_agent
pair
"$bin/replenish-agent" press button --config "$work/agent.json"
wait_for "the order" 30 order_placed
# SIGTERM to the agent itself (not to strace, which would kill it), so the graceful stop is traced too.
traced=$(pgrep -P "$agent_pid")
kill -TERM "$traced"
wait "$agent_pid" || true
stop_all

# The unit's filter, expanded: @system-service without @privileged.
expand() {
  systemd-analyze syscall-filter "$1" | tail -n +2 | sed 's/^ *//; /^#/d; /^$/d' | while read -r name; do
    if [[ $name == @* ]]; then expand "$name"; else echo "$name"; fi
  done
}
expand @system-service | sort -u >"$work/allowed"
expand @privileged | sort -u >"$work/denied"
comm -23 "$work/allowed" "$work/denied" >"$work/filter"

# Lines of `strace -f`: "PID name(args) = result", or "PID <... name resumed>" for a call split by a thread
# switch (counted at its start only).
sed -nE 's/^[0-9]+ +([a-z_0-9]+)\(.*/\1/p' "$work"/trace/* | sort | uniq -c | awk '{ print $2, $1 }' >"$work/called"
forbidden=0
while read -r name calls; do
  if grep -qx "$name" "$work/filter"; then
    printf '  %-24s %8s\n' "$name" "$calls"
  else
    printf '  %-24s %8s   NOT IN THE UNIT'"'"'S FILTER\n' "$name" "$calls"
    forbidden=$((forbidden + 1))
  fi
done <"$work/called"
# MemoryDenyWriteExecute=yes refuses memory that is writable and executable at once (libffi closures would
# need it): no such mapping may be asked for.
if grep -E '(mmap|mprotect|pkey_mprotect)\(' "$work"/trace/* | grep -E 'PROT_WRITE\|PROT_EXEC|PROT_EXEC\|PROT_WRITE' ; then
  echo "a writable and executable mapping: MemoryDenyWriteExecute=yes would refuse it"
  forbidden=$((forbidden + 1))
fi
echo "$(wc -l <"$work/called") distinct system calls over the agent's commands (check-config, run, press, status); $forbidden outside the filter"
[[ $forbidden -eq 0 ]]
