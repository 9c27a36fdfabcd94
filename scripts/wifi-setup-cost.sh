#!/bin/bash
# scripts/wifi-setup-cost.sh NEW_BINARY OLD_BINARY: what the Wi-Fi setup costs a unit that is not in setup mode
# (docs/benchmarks.md): exec → READY=1 (median of 20 starts, bench/driver.py ready) and the footprint once READY=1
# (bench/driver.py footprint) of an older build and of this one, each unpaired on the bench board, this one also
# with `wifiSetup` on and dormant (the machine has a default route). The binaries: /usr/bin/replenish-agent of
# two packages (`dpkg-deb -x`). Needs python3.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"
new=$1 old=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p $work/state-a $work/state-b $work/state-c; chmod 700 $work/state-*
$new make-setup-key $work/setup-key >/dev/null
for v in a b c; do
  extra=""
  [ $v = c ] && extra=', "wifiSetup": { "interface": "wlan0", "accessPointInterface": "ap0" }'
  key=""
  [ $v = c ] && key=', "setupKeyFile": "'$work'/setup-key"'
  write_idle_config $work/agent-$v.json $v "$key" "$extra"
done
echo "old (no wifiSetup):      $(python3 $root/bench/driver.py ready --count 20 -- $old run --config $work/agent-a.json)"
echo "new (no wifiSetup):      $(python3 $root/bench/driver.py ready --count 20 -- $new run --config $work/agent-b.json)"
echo "new (wifiSetup, dormant): $(python3 $root/bench/driver.py ready --count 20 -- $new run --config $work/agent-c.json)"
echo "footprint old: $(python3 $root/bench/driver.py footprint -- $old run --config $work/agent-a.json)"
echo "footprint new: $(python3 $root/bench/driver.py footprint -- $new run --config $work/agent-b.json)"
echo "footprint new+wifi: $(python3 $root/bench/driver.py footprint -- $new run --config $work/agent-c.json)"
