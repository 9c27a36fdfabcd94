#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the agent builds against (and the demo uses), if any are missing.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
# libfaketime: the process tests move the agent's wall clock with it (a day offline, RealHomesTests).
packages=(libcurl4-openssl-dev libgpiod-dev libssl-dev pkg-config openssl curl libfaketime)
apt_install "${packages[@]}"
