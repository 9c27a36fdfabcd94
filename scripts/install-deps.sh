#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the agent builds against (and the demo uses), if any are missing.
set -euo pipefail
# libfaketime: the process tests move the agent's wall clock with it (a day offline, RealHomesTests).
packages=(libcurl4-openssl-dev libgpiod-dev libssl-dev pkg-config openssl curl libfaketime)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
