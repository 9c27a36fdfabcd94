#!/usr/bin/env bash
# The package's install, upgrade, remove and purge cycle in a Debian bookworm chroot (made once with
# mmdebstrap, cached as .build/deb-chroot.tar). No systemd runs in a chroot, so this checks what the
# maintainer scripts do to files, users and unit links; the booted VM test checks the running service.
# Usage (root): scripts/deb-chroot-test.sh [.build/deb/replenish-agent_<version>_<arch>.deb]
#               scripts/deb-chroot-test.sh --prepare   (only the chroot's tarball: scripts/test.sh makes it
#                                                       in the background while it builds)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt.sh
if [ "$(id -u)" -ne 0 ]; then # chroot and dpkg --root need root: again through sudo
  command -v sudo >/dev/null 2>&1 || { echo "deb-chroot-test: needs root (chroot): run it as root" >&2; exit 1; }
  exec sudo --preserve-env=PATH,HOME bash "$0" "$@"
fi
prepare_only=0
[ "${1:-}" = --prepare ] && prepare_only=1
# man-db: the manual page is read as an owner would.
include=adduser,init-system-helpers,libcurl4,libgpiod2,libssl3,ca-certificates,man-db
tarball=.build/deb-chroot-$(echo "$include" | sha256sum | cut -c1-12).tar
if [[ ! -f $tarball || ! -s $tarball ]]; then
  apt_need_commands mmdebstrap=mmdebstrap
  rm -rf .build/deb-chroot*.tar "$tarball.tmp"
  # --format=tar: the temporary name has no .tar ending, from which mmdebstrap would choose a directory.
  mmdebstrap --variant=apt --format=tar --include="$include" bookworm "$tarball.tmp" && mv "$tarball.tmp" "$tarball"
fi
[ "$prepare_only" = 1 ] && exit 0
deb=${1:-$(ls -t .build/deb/replenish-agent_*.deb | head -n 1)}
root=$(mktemp -d /tmp/replenish-chroot.XXXXXX)
trap 'rm -rf "$root"' EXIT
tar -C "$root" -xf "$tarball"
in_root() { chroot "$root" "$@"; }
# The agent's Swift runtime reads its arguments from /proc/self/cmdline: without /proc it sees none (and prints
# its help). A command of the agent runs with /proc mounted in a private mount namespace, gone with the command.
in_root_proc() { unshare --mount --fork sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$root" "$@"; }
passes=0
pass() { echo "CHROOT PASS $1"; passes=$((passes + 1)); }
fail() { echo "CHROOT FAIL $1" >&2; exit 1; }
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

# Older builds of the same package under lower versions. ~older in the layout of the releases before this one:
# agent.json a dpkg conffile whose shipped example differs from this release's (no pairing.setupKeyFile line),
# so an upgrade that kept the conffile would stop at dpkg's prompt. ~earliest: this package as it is, two releases
# back from it (its rollback is refused).
version=$(dpkg-deb -f "$deb" Version)
older=$root/tmp/older.deb
unpacked=$(mktemp -d)
dpkg-deb -R "$deb" "$unpacked"
sed -i "s/^Version: .*/Version: $version~older/" "$unpacked/DEBIAN/control"
install -D -m 0640 <(sed -e 's/"windowMinutes": 10,/"windowMinutes": 10/' -e '/"setupKeyFile"/d' config/agent.example.json) \
  "$unpacked/etc/replenish-agent/agent.json"
cmp -s "$unpacked/etc/replenish-agent/agent.json" config/agent.example.json && fail "the older build's example equals this one's"
install -m 0644 "$unpacked/etc/replenish-agent/agent.json" "$unpacked/usr/share/replenish-agent/agent.example.json"
echo /etc/replenish-agent/agent.json >"$unpacked/DEBIAN/conffiles"
(cd "$unpacked" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$unpacked/DEBIAN/md5sums"
dpkg-deb --root-owner-group --build "$unpacked" "$older" >/dev/null
rm -rf "$unpacked"
unpacked=$(mktemp -d)
dpkg-deb -R "$deb" "$unpacked"
sed -i "s/^Version: .*/Version: $version~earliest/" "$unpacked/DEBIAN/control"
dpkg-deb --root-owner-group --build "$unpacked" "$root/tmp/earliest.deb" >/dev/null
rm -rf "$unpacked"
cp "$deb" "$root/tmp/new.deb"

wants=/etc/systemd/system/multi-user.target.wants/replenish-agent.service
mode() { in_root stat -c '%U:%G %a' "$1"; }

echo "== fresh install of $version~older (the shipped example config)"
in_root dpkg -i /tmp/older.deb </dev/null 2>&1 | tee "$root/tmp/install.log"
check user-made in_root getent passwd replenish
check user-in-gpio bash -c "chroot '$root' id -nG replenish | tr ' ' '\n' | grep -qx gpio"
check user-no-login bash -c "chroot '$root' getent passwd replenish | grep -qE ':/usr/sbin/nologin$'"
check config-mode [ "$(mode /etc/replenish-agent/agent.json)" == "root:replenish 640" ]
check not-enabled-with-example-config [ ! -e "$root$wants" ]
check tells-what-to-do grep -q "systemctl enable --now replenish-agent" "$root/tmp/install.log"
check binary-runs bash -c "chroot '$root' /usr/bin/replenish-agent --help >/dev/null"
# The manual page, as `man` shows it, has the subcommands; bash completes a subcommand from the package's script
# (what bash-completion would load for the command: its `complete` line, then its function called as bash does).
check manual-page bash -c "chroot '$root' env MANPAGER=cat MANWIDTH=100 man replenish-agent 2>/dev/null | grep -qE '^ +check-config( |\$)'"
cat >"$root/tmp/complete.sh" <<'COMPLETE'
. /usr/share/bash-completion/completions/replenish-agent
complete -p replenish-agent >/dev/null || exit 1
COMP_LINE="replenish-agent che" COMP_POINT=19 COMP_WORDS=(replenish-agent che) COMP_CWORD=1 COMPREPLY=()
_replenish-agent replenish-agent che replenish-agent
printf '%s\n' "${COMPREPLY[@]}"
COMPLETE
check bash-completes-check-config bash -c "chroot '$root' bash /tmp/complete.sh | grep -qx check-config"
# The installed config is the example: check-config must refuse it (exit 1), with one line for each value still
# at a placeholder, naming its key (a unit shipped like this could never pair or order).
set +e
in_root_proc /usr/bin/replenish-agent check-config --config /etc/replenish-agent/agent.json \
  >"$root/tmp/check-config.out" 2>"$root/tmp/check-config.err"
check_status=$?
set -e
cat "$root/tmp/check-config.err"
check example-config-refused [ "$check_status" -eq 1 ]
for key in device.serial device.model lwa.clientId lwa.clientSecret 'buttons[0].slot'; do
  check "example-placeholder-$key" [ "$(grep -cF "$key: still the example's placeholder" "$root/tmp/check-config.err")" -eq 1 ]
done
check example-secret-not-printed bash -c "! grep -q REPLACE-WITH-YOUR-LWA-CLIENT-SECRET '$root/tmp/check-config.err'"

echo "== the owner edits the config and enables the unit; upgrade to $version"
sed -i 's/"REPLACEWITHUNITSERIAL"/"SNEDITED"/' "$root/etc/replenish-agent/agent.json"
# What `systemctl enable` does (no systemd runs here): the WantedBy= link.
in_root mkdir -p "$(dirname "$wants")"
in_root ln -s /usr/lib/systemd/system/replenish-agent.service "$wants"
in_root mkdir -p /var/lib/replenish-agent
echo '{"kept":true}' >"$root/var/lib/replenish-agent/tokens.json"
cp -p "$root/etc/replenish-agent/agent.json" "$root/tmp/agent.json.edited"
# No --force-conf* and no terminal (stdin empty), as unattended-upgrades runs dpkg: a conffile prompt fails it.
check upgrade-without-prompt bash -c "chroot '$root' dpkg -i /tmp/new.deb </dev/null"
check upgraded [ "$(in_root dpkg-query -W -f '${Version}' replenish-agent)" == "$version" ]
check edited-config-kept cmp -s "$root/tmp/agent.json.edited" "$root/etc/replenish-agent/agent.json"
check no-conffile-left bash -c "[ ! -e '$root/etc/replenish-agent/agent.json.dpkg-new' ] && [ ! -e '$root/etc/replenish-agent/agent.json.dpkg-dist' ]"
echo "== rollback: two releases back ($version~earliest) refused; to the release it came from ($version~older) without a prompt"
set +e
in_root dpkg -i /tmp/earliest.deb </dev/null >"$root/tmp/rollback.log" 2>&1
rollback_status=$?
set -e
cat "$root/tmp/rollback.log"
check rollback-two-back-refused [ "$rollback_status" -ne 0 ]
check rollback-refusal-says-why grep -q "roll back to $version~older" "$root/tmp/rollback.log"
check rollback-refusal-changes-nothing [ "$(in_root dpkg-query -W -f '${Version} ${db:Status-Abbrev}' replenish-agent)" == "$version ii " ]
check rollback-to-updated-from bash -c "chroot '$root' dpkg -i /tmp/older.deb </dev/null"
check rollback-config-kept cmp -s "$root/tmp/agent.json.edited" "$root/etc/replenish-agent/agent.json"
check upgrade-again bash -c "chroot '$root' dpkg -i /tmp/new.deb </dev/null"
check config-mode-after-upgrade [ "$(mode /etc/replenish-agent/agent.json)" == "root:replenish 640" ]
check still-enabled [ -L "$root$wants" ]
check state-kept-on-upgrade [ -s "$root/var/lib/replenish-agent/tokens.json" ]

echo "== remove"
in_root dpkg -r replenish-agent
check binary-gone [ ! -e "$root/usr/bin/replenish-agent" ]
check state-kept-on-remove [ -s "$root/var/lib/replenish-agent/tokens.json" ]
check config-kept-on-remove grep -q SNEDITED "$root/etc/replenish-agent/agent.json"
check unit-masked-on-remove [ "$(readlink "$root/etc/systemd/system/replenish-agent.service")" == /dev/null ]

echo "== purge"
purge_output=$(in_root dpkg -P replenish-agent 2>&1)
echo "$purge_output"
check purge-says-user-kept grep -q "Kept the system user 'replenish'" <<<"$purge_output"
check purge-says-gpio-kept grep -q "kept the group 'gpio'" <<<"$purge_output"
check state-deleted-on-purge [ ! -e "$root/var/lib/replenish-agent" ]
check config-deleted-on-purge [ ! -e "$root/etc/replenish-agent/agent.json" ]
check statoverride-gone-on-purge bash -c "! chroot '$root' dpkg-statoverride --list /etc/replenish-agent/agent.json"
check links-gone-on-purge bash -c "[ ! -e '$root$wants' ] && [ ! -L '$root/etc/systemd/system/replenish-agent.service' ]"
check user-kept-on-purge in_root getent passwd replenish

echo "== install on an image whose config was put in place first (image builders)"
in_root mkdir -p /etc/replenish-agent
sed 's/"REPLACEWITHUNITSERIAL"/"SNIMAGE"/' config/agent.example.json >"$root/etc/replenish-agent/agent.json"
in_root dpkg -i /tmp/new.deb </dev/null
check image-config-kept grep -q SNIMAGE "$root/etc/replenish-agent/agent.json"
check enabled-with-edited-config [ -L "$root$wants" ]
check image-config-mode [ "$(mode /etc/replenish-agent/agent.json)" == "root:replenish 640" ]
in_root dpkg -P replenish-agent
check purge-again [ ! -e "$root$wants" ]

echo "== a first install of this release makes the config from the example"
in_root dpkg -i /tmp/new.deb </dev/null
check fresh-config-is-example cmp -s "$root/etc/replenish-agent/agent.json" "$root/usr/share/replenish-agent/agent.example.json"
check fresh-config-mode [ "$(mode /etc/replenish-agent/agent.json)" == "root:replenish 640" ]
check fresh-not-enabled [ ! -e "$root$wants" ]
in_root dpkg -P replenish-agent
check fresh-config-purged [ ! -e "$root/etc/replenish-agent" ]

echo "CHROOT ALL PASS ($passes checks)"
