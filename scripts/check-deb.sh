#!/usr/bin/env bash
# Checks a built replenish-agent .deb without installing it: its file list and modes, its control fields,
# that its Depends cover every shared library the binary needs, and lintian (errors fail; warnings are
# printed): bookworm's lintian (this machine's) for the amd64 package, trixie's (the arm64 steps' trixie chroot,
# .build/vm/kbuild-trixie) for the arm64 one, each the release the package is for.
# Usage: scripts/check-deb.sh .build/deb/replenish-agent_<version>_<arch>.deb
set -euo pipefail
deb=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/apt.sh"
apt_need_commands dpkg-deb=dpkg lintian=lintian file=file readelf=binutils

contents=$(dpkg-deb -c "$deb")
for entry in "-rwxr-xr-x root/root .* ./usr/bin/replenish-agent" \
  "-rw-r--r-- root/root .* ./usr/lib/systemd/system/replenish-agent.service" \
  "-rw-r--r-- root/root .* ./usr/lib/udev/rules.d/99-replenish-agent-gpio.rules" \
  "-rw-r--r-- root/root .* ./usr/lib/systemd/system/replenish-agent-ap0.service" \
  "-rwxr-xr-x root/root .* ./usr/lib/replenish-agent/ap-interface" \
  "-rw-r--r-- root/root .* ./usr/lib/NetworkManager/conf.d/50-replenish-agent.conf" \
  "-rw-r--r-- root/root .* ./usr/share/polkit-1/rules.d/50-replenish-agent.rules" \
  "-rw-r--r-- root/root .* ./usr/share/replenish-agent/board/raspberry-pi-4b.json" \
  "-rw-r--r-- root/root .* ./usr/share/replenish-agent/agent.example.json" \
  "-rw-r--r-- root/root .* ./usr/share/replenish-agent/agent.alexa.example.json" \
  "drwxr-xr-x root/root .* ./etc/replenish-agent/" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/copyright" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/NOTICE" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/changelog.gz" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/README.md" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/docs/device-maker-checklist.md" \
  "-rw-r--r-- root/root .* ./usr/share/doc/replenish-agent/docs/time-sync.md" \
  "-rw-r--r-- root/root .* ./usr/share/man/man1/replenish-agent.1.gz" \
  "-rw-r--r-- root/root .* ./usr/share/bash-completion/completions/replenish-agent" \
  "-rw-r--r-- root/root .* ./usr/share/zsh/vendor-completions/_replenish-agent" \
  "-rw-r--r-- root/root .* ./usr/share/fish/vendor_completions.d/replenish-agent.fish"; do
  grep -qE -- "^$entry\$" <<<"$contents" || fail "$deb lacks: $entry"
done
# Nothing under /lib (trixie's merged /usr), and the example config once, in /usr/share.
grep -qE ' \./lib/' <<<"$contents" && fail "$deb has files under /lib: $(grep -E ' \./lib/' <<<"$contents")"
[ "$(grep -c 'agent\.example\.json$' <<<"$contents")" = 1 ] || fail "$deb ships the example config more than once"
# No config in /etc and no conffile: postinst makes agent.json from the example when there is none, so a release
# whose example changed never stops an edited unit at dpkg's conffile prompt (docs/production.md).
grep -qE ' \./etc/.*[^/]$' <<<"$contents" && fail "$deb ships files in /etc: $(grep -E ' \./etc/.*[^/]$' <<<"$contents")"
# The maker's Maintainer and Homepage (packaging/maker.conf), never a placeholder.
{ read -r maintainer; read -r homepage; } < <(bash "$(dirname "$0")/maker.sh" 2>/dev/null) || fail "scripts/maker.sh"
[[ "$(dpkg-deb -f "$deb" Maintainer)" == "$maintainer" ]] || fail "Maintainer is '$(dpkg-deb -f "$deb" Maintainer)', not '$maintainer'"
[[ "$(dpkg-deb -f "$deb" Homepage)" == "$homepage" ]] || fail "Homepage is '$(dpkg-deb -f "$deb" Homepage)', not '$homepage'"
echo "ok: Maintainer: $maintainer${homepage:+; Homepage: $homepage}"
[[ "$(dpkg-deb -f "$deb" Package)" == replenish-agent ]] || fail "Package field"
# gpioinfo (the gpiod package) lists a board's chips and lines; the docs send makers to it.
[[ "$(dpkg-deb -f "$deb" Suggests)" == *gpiod* ]] || fail "Suggests does not name gpiod"
arch=$(dpkg-deb -f "$deb" Architecture)
case "$arch" in
amd64) machine=x86-64 ;;
arm64) machine=aarch64 ;;
*) fail "Architecture field: $arch" ;;
esac
dpkg-deb -I "$deb" conffiles >/dev/null 2>&1 && fail "the package lists conffiles: $(dpkg-deb -I "$deb" conffiles)"
echo "ok: no conffiles, no file in /etc"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
names=$(sed 's/([^)]*)//g; s/[,|]/\n/g; s/ //g' <<<"$depends")

# Every library the binary needs belongs to a package named in Depends.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch"
# Every file the unit's Documentation= points to is in the package (what `systemctl help` opens).
documents=$(sed -n 's/^Documentation=//p' "$scratch/usr/lib/systemd/system/replenish-agent.service" | tr ' ' '\n' |
  sed -n 's|^file://||p')
[[ -n "$documents" ]] || fail "the unit names no file:// Documentation="
for document in $documents; do
  [[ -f "$scratch$document" ]] || fail "the unit's Documentation= names $document, which the package lacks"
done
echo "ok: the unit's Documentation= files are in the package: $(echo $documents)"
# Every link in the installed README and docs leads to a file of the package (deb.sh unlinks the rest).
for doc in "$scratch/usr/share/doc/replenish-agent/README.md" "$scratch"/usr/share/doc/replenish-agent/docs/*.md; do
  while IFS= read -r target; do
    case "$target" in http://* | https://* | mailto:* | man:* | '#'*) continue ;; esac
    [ -e "$(dirname "$doc")/${target%%#*}" ] || fail "${doc#"$scratch"}: the link '$target' leads nowhere on a device"
  done < <(grep -oE '\]\([^) ]+\)' "$doc" | sed -E 's/^\]\(//; s/\)$//' | sort -u)
done
echo "ok: every link in the installed docs leads to a file of the package"
# The installed copyright file lists every package of the build's Package.resolved, and llhttp.
bash "$(dirname "$0")/check-license.sh" "$(cd "$(dirname "$0")/.." && pwd)/Package.resolved" \
  "$scratch/usr/share/doc/replenish-agent/copyright" || fail "the package's copyright file (above)"
binary=$scratch/usr/bin/replenish-agent
file -b "$binary" | grep -q "ELF 64-bit.*[ ,]$machine," || fail "the binary is not for $arch: $(file -b "$binary")"
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
grep -iE 'swift|Foundation|icu|dispatch' <<<"$needed" && fail "the binary needs the Swift runtime"
if [[ "$arch" != "$(dpkg --print-architecture)" ]]; then
  # A cross-built package: the libraries and their packages are those of the sysroot it was linked against
  # (scripts/arm64.sh keeps its package database).
  admindir=$(bash "$(dirname "$0")/arm64.sh" shlibs-admindir)
  query() { dpkg-query --admindir="$admindir" "$@"; }
  # The closure of Depends in the sysroot's packages.
  closure=$names
  while :; do
    more=$(for name in $closure; do query -W -f='${Depends},${Pre-Depends}\n' "$name" 2>/dev/null; done |
      sed 's/([^)]*)//g; s/|/,/g; s/:any//g; s/ //g' | tr ',' '\n' | sed '/^$/d' | sort -u)
    next=$(printf '%s\n' $closure $more | sort -u)
    [[ "$next" == "$(printf '%s\n' $closure | sort -u)" ]] && break
    closure=$next
  done
  for soname in $needed; do
    list=$(grep -lE "/$(sed 's/[.+]/\\&/g' <<<"$soname")\$" "$admindir"/info/*.list | head -n 1)
    [[ -n "$list" ]] || fail "no package of the sysroot has $soname"
    owner=$(basename "$list" .list)
    owner=${owner%%:*}
    grep -qxF "$owner" <<<"$closure" || fail "$soname ($owner) is needed but not in Depends"
  done
  echo "ok: every shared library of the binary ($(echo $needed)) is covered by Depends (in Debian's $arch packages)"
else
# The packages Depends pulls in, recursively (computed once).
# shellcheck disable=SC2086
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
  --no-enhances $names 2>/dev/null | sed -nE 's/^ *(Pre)?Depends: <?([^:>]+).*/\2/p; s/^([a-z0-9][^ :]*)$/\1/p' |
  sort -u >"$scratch/closure"
for library in $(ldd "$binary" | awk '/=>/ { print $3 }'); do
  owner=$(dpkg -S "$(readlink -f "$library")" 2>/dev/null | head -n 1 | cut -d: -f1) ||
    owner=$(dpkg -S "$library" 2>/dev/null | head -n 1 | cut -d: -f1)
  [[ -n "$owner" ]] || fail "no package owns $library"
  # A library is covered when its package is a dependency, or one of them pulls it in (libcurl4 → libssl3 …).
  grep -qxF "$owner" <<<"$names" || grep -qxF "$owner" "$scratch/closure" ||
    fail "$library ($owner) is needed but not in Depends"
done
echo "ok: every shared library of the binary is covered by Depends"
# The packaged binary says which build it is (issue #22): the package's own version and the commit it was
# built from, never "unknown" (a build without scripts/build-info.sh).
version=$(dpkg-deb -f "$deb" Version)
said=$("$binary" --version) || fail "replenish-agent --version failed"
grep -qF "package $version," <<<"$said" || fail "--version says \"$said\", not the package version $version"
grep -qE "commit [0-9a-f]{12}(-dirty)?\)" <<<"$said" || fail "--version says \"$said\", without the commit"
echo "ok: $said"
fi

if [[ "$arch" == amd64 ]]; then
  echo "== lintian $(lintian --version | awk '{print $2}') (this machine's: bookworm)"
  report=$(lintian --tag-display-limit 0 "$deb" 2>&1 || true)
else
  # trixie's lintian, in the trixie chroot of the arm64 steps (scripts/vm/arm64.sh installs lintian there).
  trixie=$(cd "$(dirname "$0")/.." && pwd)/.build/vm/kbuild-trixie
  [ -x "$trixie/usr/bin/lintian" ] ||
    fail "no trixie lintian in $trixie: run scripts/vm-boot-test.sh arm64 rootfs-only first"
  cp "$deb" "$trixie/tmp/check.deb"
  in_trixie() { chroot "$trixie" env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
  echo "== lintian $(in_trixie lintian --version | awk '{print $2}') (trixie's)"
  report=$(in_trixie lintian --tag-display-limit 0 /tmp/check.deb 2>&1 || true)
  rm -f "$trixie/tmp/check.deb"
fi
echo "$report"
if grep -q '^E: ' <<<"$report"; then fail "lintian reports errors"; fi
if grep -qE 'no-manual-page|aliased-location' <<<"$report"; then fail "lintian: no-manual-page or aliased-location"; fi
echo "ok: lintian reports no errors ($(grep -c '^W: ' <<<"$report" || true) warnings)"
