#!/bin/bash
# scripts/program-cost.sh NEW_BINARY OLD_BINARY: what program alexa costs a unit of program drs (docs/benchmarks.md):
# the stripped binaries' sizes, exec → READY=1 (median of 20 starts, bench/driver.py ready) and the footprint once
# READY=1 (bench/driver.py footprint) of an older build and of this one, each in program drs, unpaired on the bench
# board; and this one in program alexa (its cloud unreachable, so it waits on its backoff). The binaries:
# /usr/bin/replenish-agent of two packages (`dpkg-deb -x`). Needs python3 and openssl.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
new=$1 old=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p $work/state-a $work/state-b $work/state-c; chmod 700 $work/state-*
for v in a b; do write_idle_config $work/agent-$v.json $v; done
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=READY0001 -days 1 \
  -keyout $work/unit.key -out $work/unit.pem 2>/dev/null
chmod 600 $work/unit.key
cat > $work/agent-c.json <<JSON
{
  "program": "alexa",
  "device": { "serial": "READY0001", "model": "model-1", "phase": "test" },
  "alexa": { "cloudURL": "https://127.0.0.1:9", "certificateFile": "$work/unit.pem", "keyFile": "$work/unit.key" },
  "stateDirectory": "$work/state-c",
  "runtimeDirectory": "$work/run-c",
  "board": "$root/bench/board.json",
  "buttons": [ { "input": "button", "slot": "slot-1" } ]
}
JSON
echo "binary old: $(stat -c %s $old) bytes; new: $(stat -c %s $new) bytes"
echo "exec -> READY old (drs):   $(python3 $root/bench/driver.py ready --count 20 -- $old run --config $work/agent-a.json)"
echo "exec -> READY new (drs):   $(python3 $root/bench/driver.py ready --count 20 -- $new run --config $work/agent-b.json)"
echo "exec -> READY new (alexa): $(python3 $root/bench/driver.py ready --count 20 -- $new run --config $work/agent-c.json)"
echo "footprint old (drs):   $(python3 $root/bench/driver.py footprint -- $old run --config $work/agent-a.json)"
echo "footprint new (drs):   $(python3 $root/bench/driver.py footprint -- $new run --config $work/agent-b.json)"
echo "footprint new (alexa): $(python3 $root/bench/driver.py footprint -- $new run --config $work/agent-c.json)"
