#!/bin/sh
# Run by gpio-sim-chip.service at boot, before the agent: loads configfs and the out-of-tree gpio-sim module
# (scripts/vm/common.sh builds it) and makes an 8-line chip labelled "replenish-test". Writes the chip's sysfs
# folder (where sim_gpioN/pull presses a button) to /run/vm-test/sim.
set -eu
modprobe configfs
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
insmod /usr/local/lib/vm-test/gpio-sim.ko
config=/sys/kernel/config/gpio-sim/chip0
mkdir "$config" "$config/bank0"
echo 8 >"$config/bank0/num_lines"
echo replenish-test >"$config/bank0/label"
echo 1 >"$config/live"
dev_name=$(cat "$config/dev_name")
chip_name=$(cat "$config/bank0/chip_name")
mkdir -p /run/vm-test
echo "/sys/devices/platform/$dev_name/$chip_name" >/run/vm-test/sim
# The agent's udev rule gives the chip to the gpio group; wait for udev before the agent starts. Under TCG on a
# loaded machine, with the simulated radios' events in the same queue, udev has taken over a minute: wait for the
# chip's node to be initialized by udev (its rules run: the group the agent needs) for up to 3 minutes, not for the
# whole queue. `udevadm wait` is one process for the whole wait: a poll of `stat` every 0.5 s cost the emulated
# arm64 CPU 18.6 s of a 96 s wait.
udevadm wait --timeout=180 --initialized=yes "/dev/$chip_name" || true
ls -l "/dev/$chip_name"
