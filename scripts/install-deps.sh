#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the agent builds against (and the demo uses), if any are missing: nothing
# is installed, and no root is needed, when they are all there.
#   scripts/install-deps.sh           the build's and the demo's packages
#   scripts/install-deps.sh --tests   those and the tests' own: libfaketime (the process tests move the agent's
#                                     wall clock with it: a day offline, RealHomesTests); avahi-daemon,
#                                     avahi-utils and dbus (DNSSDTests runs them in a network namespace of its
#                                     own; installing them starts nothing where systemd is not PID 1);
#                                     python3-dbus and python3-gi (DBusNetworkManagerTests' fake NetworkManager
#                                     on a private bus); socat (with OpenSSL: the TLS terminator in front of
#                                     the emulator where a test wants HTTPS); nginx-light (mutual TLS in front
#                                     of the emulator's maker's cloud, passing the unit certificate's subject as
#                                     a load balancer's mTLS verify mode does: AlexaProgramTests)
set -euo pipefail
. "$(dirname "$0")/apt.sh"
packages=(libcurl4-openssl-dev libgpiod-dev libssl-dev libavahi-client-dev pkg-config openssl curl)
case "${1:-}" in
"") ;;
--tests) packages+=(libfaketime avahi-daemon avahi-utils dbus python3-dbus python3-gi socat nginx-light) ;;
*) echo "usage: scripts/install-deps.sh [--tests]" >&2; exit 2 ;;
esac
apt_install "${packages[@]}"
