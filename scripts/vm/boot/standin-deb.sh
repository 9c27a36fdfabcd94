#!/usr/bin/env bash
# A stand-in for `make deb` (scripts/deb.sh), used by scripts/vm-boot-test.sh only while the repository has no
# package build of its own: replenish-agent_VERSION_amd64.deb with the release binary in /usr/bin, the unit
# (paths moved to /usr/bin), the udev rule, the board files and the example config as a conffile, and
# maintainer scripts that create the system user (group gpio), enable the unit, stop it on removal, keep the
# state directory on remove and delete it on purge.
#
#   scripts/vm/boot/standin-deb.sh BINARY VERSION OUTPUT.deb
set -euo pipefail
cd "$(dirname "$0")/../../.."
binary=$1 version=$2 output=$3
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$binary" "$stage/usr/bin/replenish-agent"
install -d "$stage/lib/systemd/system" "$stage/lib/udev/rules.d" "$stage/usr/share/replenish-agent/board" \
  "$stage/etc/replenish-agent" "$stage/DEBIAN"
sed 's#/usr/local/bin/replenish-agent#/usr/bin/replenish-agent#g' config/replenish-agent.service \
  >"$stage/lib/systemd/system/replenish-agent.service"
install -m 0644 board/99-replenish-agent-gpio.rules "$stage/lib/udev/rules.d/"
install -m 0644 board/*.json "$stage/usr/share/replenish-agent/board/"
install -m 0640 config/agent.example.json "$stage/etc/replenish-agent/agent.json"
echo /etc/replenish-agent/agent.json >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: replenish-agent
Version: $version
Architecture: amd64
Maintainer: replenish-agent VM boot test <nobody@example.invalid>
Depends: libc6, libcurl4, libgpiod2 | libgpiod3, libssl3, adduser
Section: misc
Priority: optional
Description: Dash Replenishment device agent (stand-in package of the VM boot test)
 Built by scripts/vm/boot/standin-deb.sh until the repository has its own package build.
CONTROL
cat >"$stage/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  getent group gpio >/dev/null || addgroup --system gpio
  getent passwd replenish >/dev/null ||
    adduser --system --group --home /var/lib/replenish-agent --no-create-home replenish
  adduser replenish gpio >/dev/null
  chgrp replenish /etc/replenish-agent/agent.json
  systemctl enable replenish-agent.service >/dev/null 2>&1 || true
  if [ -d /run/systemd/system ]; then
    udevadm control --reload || true
    systemctl daemon-reload
    systemctl restart replenish-agent.service
  fi
fi
SCRIPT
cat >"$stage/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then systemctl stop replenish-agent.service || true; fi
SCRIPT
cat >"$stage/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  systemctl disable replenish-agent.service >/dev/null 2>&1 || true
  [ -d /run/systemd/system ] && systemctl daemon-reload || true
fi
if [ "$1" = purge ]; then rm -rf /var/lib/replenish-agent; fi
SCRIPT
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
dpkg-deb --root-owner-group -Zxz -b "$stage" "$output" >/dev/null
