#!/usr/bin/env bash
# `make deb`: builds replenish-agent_<version>_<arch>.deb into .build/deb/ from a release build with the Swift
# standard library linked statically (the device needs no Swift runtime). The architecture is the build
# machine's (`dpkg --print-architecture`), or ARCH=arm64 (`make deb ARCH=arm64`): the binary that
# scripts/arm64.sh cross-builds for Debian trixie arm64, with its Depends computed against that release.
#
# Version: the VERSION file plus `+<commits>.g<hash>` (so every commit builds a newer package and installing
# a later build over an earlier one is an upgrade), or DEB_VERSION from the environment as it is; computed by
# scripts/build-info.sh, which also writes it and the commit into the binary (`replenish-agent --version`).
# Runtime dependencies are computed by dpkg-shlibdeps from the binary (a temporary debian/control in a
# scratch folder is all it needs), so they are exactly the shared libraries the binary links.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/.build/deb

. scripts/apt.sh
. scripts/cache.sh
# Every tool this script uses, checked before anything is built: a missing one is named with its package and
# installed (scripts/apt.sh: as root or through sudo), never a bare "command not found" halfway.
command -v swift >/dev/null 2>&1 || { echo "deb.sh: no swift on PATH (README: Swift 6)" >&2; exit 1; }
apt_need_commands dpkg=dpkg dpkg-deb=dpkg dpkg-shlibdeps=dpkg-dev dpkg-architecture=dpkg-dev strip=binutils \
  gzip=gzip md5sum=coreutils
# The host build that makes the manual page and the completions (every ARCH) links what the agent links: the
# README's Swift step installs libcurl's headers and pkg-config; libgpiod's and OpenSSL's are installed here.
apt_install libcurl4-openssl-dev libgpiod-dev libssl-dev libavahi-client-dev pkg-config ||
  { echo "deb.sh: the host build needs libcurl4-openssl-dev libgpiod-dev libssl-dev libavahi-client-dev pkg-config" >&2; exit 1; }
bash scripts/build-info.sh
# The release build's scratch folder: DEB_SCRATCH, or .build-deb as a link into the cache (scripts/cache.sh,
# cached_scratch); SwiftPM is given the folder the link names.
if [ -n "${DEB_SCRATCH:-}" ]; then
  scratch=$(readlink -m "$DEB_SCRATCH")
else
  scratch=$(cached_scratch "$root/.build-deb" release-amd64 "$(swift --version 2>&1 | head -n 1)")
fi

# The package's Maintainer (packaging/maker.conf, scripts/maker.sh). None set: asked for on a terminal and kept in
# packaging/maker.conf; otherwise the one line to set is named, and nothing is built.
if ! bash scripts/maker.sh >/dev/null 2>&1 && [ -z "${DEB_MAINTAINER:-}" ]; then
  echo "deb.sh: the package needs a Maintainer, the device maker's name and address, for example" >&2
  echo "  MAINTAINER=\"Example Appliances Ltd <packages@example-appliances.co.uk>\"" >&2
  echo "  in packaging/maker.conf (once; docs/device-maker-checklist.md, section 5), or DEB_MAINTAINER=\"…\" for one build." >&2
  if [ -t 0 ] && [ -t 2 ]; then
    read -r -p "Maintainer for packaging/maker.conf (Name <address>), empty to stop: " answer
    [ -n "$answer" ] || exit 1
    DEB_MAINTAINER=$answer bash scripts/maker.sh >/dev/null || exit 1
    [[ "$answer" != *[\"\$\`\\\|\&]* ]] || { echo "deb.sh: set it in packaging/maker.conf by hand (it has \" \$ \` \\ | or &)" >&2; exit 1; }
    sed -i "s|^MAINTAINER=.*|MAINTAINER=\"$answer\"|" packaging/maker.conf
    echo "deb.sh: packaging/maker.conf: MAINTAINER=\"$answer\" (commit it so every build uses it)" >&2
  else
    exit 1
  fi
fi
{ read -r maintainer; read -r homepage; } < <(bash scripts/maker.sh) || { echo "deb.sh: see packaging/maker.conf" >&2; exit 1; }
# The build's date (the manual page's, the changelog's): SOURCE_DATE_EPOCH, else the commit's.
build_epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
DEB_VERSION=$(bash scripts/build-info.sh package-version)
host_arch=$(dpkg --print-architecture)
arch=${ARCH:-$host_arch}
package=replenish-agent

if [[ "$arch" == "$host_arch" ]]; then
  echo "== release build, static Swift standard library ($scratch)"
  mapfile -t flags < <(bash scripts/release-flags.sh)
  # Exactly the versions of the committed Package.resolved (an out-of-date file fails the build).
  swift build -c release --product replenish-agent --static-swift-stdlib --scratch-path "$scratch" "${flags[@]}" \
    --only-use-versions-from-resolved-file 2>&1 | tail -n 1
  binary="$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)/replenish-agent"
  strip=strip
  shlibdeps_options=()
elif [[ "$arch" == arm64 ]]; then
  bash scripts/arm64.sh build
  binary=$root/.build-arm64/aarch64-unknown-linux-gnu/release/replenish-agent
  apt_need_commands aarch64-linux-gnu-strip=binutils-aarch64-linux-gnu
  strip=aarch64-linux-gnu-strip
  # dpkg-shlibdeps against the trixie arm64 sysroot that the binary was linked with: its package database
  # (made by scripts/arm64.sh from the packages' own control files) with the sysroot's paths.
  sysroot=$root/.build/arm64/sid/opt/cross/sysroot-trixie
  export DEB_HOST_ARCH=arm64
  shlibdeps_options=(--admindir="$(bash scripts/arm64.sh shlibs-admindir)" -l"$sysroot/usr/lib/aarch64-linux-gnu")
else
  echo "deb.sh: ARCH=$arch: this script builds for the build machine ($host_arch) or for arm64" >&2
  exit 1
fi

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
tree=$staging/tree
# Under /usr/lib, not /lib: trixie's merged /usr (lintian's aliased-location), read as well by bookworm's systemd
# and udev.
install -d -m 0755 "$tree/DEBIAN" "$tree/usr/bin" "$tree/usr/lib/systemd/system" "$tree/usr/lib/udev/rules.d" \
  "$tree/usr/share/$package/board" "$tree/usr/share/doc/$package" "$tree/etc/$package" "$tree/usr/share/man/man1" \
  "$tree/usr/share/bash-completion/completions" "$tree/usr/share/zsh/vendor-completions" \
  "$tree/usr/share/fish/vendor_completions.d"

install -m 0755 "$binary" "$tree/usr/bin/replenish-agent"
"$strip" --strip-unneeded --remove-section=.comment --remove-section=.note "$tree/usr/bin/replenish-agent"
install -m 0644 config/replenish-agent.service "$tree/usr/lib/systemd/system/replenish-agent.service"
install -m 0644 board/99-replenish-agent-gpio.rules "$tree/usr/lib/udev/rules.d/99-replenish-agent-gpio.rules"
# The Wi-Fi setup (docs/wifi-setup.md): the ap0 interface's unit and script (enabled by a maker who wants it),
# NetworkManager's setting for wlan0, and the polkit rule that lets the agent's user ask NetworkManager.
install -m 0644 config/replenish-agent-ap0.service "$tree/usr/lib/systemd/system/replenish-agent-ap0.service"
install -D -m 0755 config/replenish-agent-ap-interface "$tree/usr/lib/$package/ap-interface"
install -D -m 0644 config/replenish-agent-networkmanager.conf \
  "$tree/usr/lib/NetworkManager/conf.d/50-replenish-agent.conf"
install -D -m 0644 config/replenish-agent-polkit.rules "$tree/usr/share/polkit-1/rules.d/50-replenish-agent.rules"
install -m 0644 board/*.json "$tree/usr/share/$package/board/"
# The example, the package's only copy. /etc/replenish-agent/agent.json is no conffile: postinst copies the
# example there (root:replenish 0640) when there is no config, and never touches it again, so a release whose
# example changed installs without dpkg's conffile prompt (which unattended-upgrades skips). postinst also tells
# an edited config from the example by it, and the unit's Documentation= shows it. The package keeps owning the
# folder /etc/replenish-agent.
install -m 0644 config/agent.example.json "$tree/usr/share/$package/agent.example.json"
# The example of program alexa (docs/programs.md), for a maker to start /etc/replenish-agent/agent.json from.
install -m 0644 config/agent.alexa.example.json "$tree/usr/share/$package/agent.alexa.example.json"

install -m 0644 packaging/debian/copyright "$tree/usr/share/doc/$package/copyright"
# The attribution notices the linked Swift packages ask to be passed on (Apache License 2.0, section 4(d)).
install -m 0644 NOTICE "$tree/usr/share/doc/$package/NOTICE"
# The README and the docs a device owner or maker reads on the device (the unit's Documentation= names some, as
# file:// URLs, so `systemctl help` opens them offline), in the repository's layout so their links between them
# hold.
install -d -m 0755 "$tree/usr/share/doc/$package/docs"
install -m 0644 README.md "$tree/usr/share/doc/$package/"
install -m 0644 docs/*.md "$tree/usr/share/doc/$package/docs/"
# A link to a repository file the package does not ship (the sources, the scripts) becomes its plain text, so no
# link in the installed docs leads nowhere.
for doc in "$tree/usr/share/doc/$package/README.md" "$tree/usr/share/doc/$package"/docs/*.md; do
  while IFS= read -r target; do
    case "$target" in http://* | https://* | mailto:* | man:* | '#'*) continue ;; esac
    [ -e "$(dirname "$doc")/${target%%#*}" ] && continue
    pattern=$(printf '%s' "$target" | sed 's/[][\\.*^$|+?(){}]/\\&/g')
    # (The text may hold brackets of its own: [`scripts/soak.sh [PRESSES]`](…).)
    sed -i -E "s@\\[(([^][]|\\[[^]]*\\])*)\\]\\($pattern\\)@\\1@g" "$doc"
  done < <(grep -oE '\]\([^) ]+\)' "$doc" | sed -E 's/^\]\(//; s/\)$//' | sort -u)
done

# The manual page and the bash, zsh and fish completions, generated from the command definitions by
# swift-argument-parser (its generate-manual plugin; --generate-completion-script) with this machine's debug
# build (the tests' build: what they say does not depend on the CPU or the build's settings).
generated=$staging/generated
mkdir -p "$generated"
manual_date=$(date -u -d "@$build_epoch" +%Y-%m-%d)
tests=$(tests_scratch)
swift package --scratch-path "$tests" plugin generate-manual --configuration debug --date "$manual_date" \
  >"$generated/manual.log" 2>&1 ||
  { cat "$generated/manual.log" >&2; echo "deb.sh: generate-manual failed" >&2; exit 1; }
manual=$tests/plugins/GenerateManual/outputs/ReplenishAgent/replenish-agent.1
[ -s "$manual" ] || { echo "deb.sh: generate-manual made no $manual" >&2; exit 1; }
gzip -9n <"$manual" >"$tree/usr/share/man/man1/replenish-agent.1.gz"
host_agent="$(swift build --scratch-path "$tests" --show-bin-path)/replenish-agent"
# (bash-completion sources its scripts: the generated #! line goes, as lintian asks.)
"$host_agent" --generate-completion-script bash | sed '1{/^#!/d}' >"$tree/usr/share/bash-completion/completions/replenish-agent"
"$host_agent" --generate-completion-script zsh >"$tree/usr/share/zsh/vendor-completions/_replenish-agent"
"$host_agent" --generate-completion-script fish >"$tree/usr/share/fish/vendor_completions.d/replenish-agent.fish"
chmod 0644 "$tree/usr/share/man/man1/replenish-agent.1.gz" "$tree"/usr/share/bash-completion/completions/* \
  "$tree"/usr/share/zsh/vendor-completions/* "$tree"/usr/share/fish/vendor_completions.d/*
{
  echo "$package ($DEB_VERSION) unstable; urgency=medium"
  echo
  echo "  * Built from commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) by scripts/deb.sh."
  echo
  echo " -- $maintainer  $(date -R -u -d "@$build_epoch")"
} | gzip -9n >"$tree/usr/share/doc/$package/changelog.gz"
chmod 0644 "$tree/usr/share/doc/$package/changelog.gz"

for script in postinst prerm postrm; do
  install -m 0755 "packaging/debian/$script" "$tree/DEBIAN/$script"
done

# Dependencies from the binary itself.
shlib=$staging/shlib
mkdir -p "$shlib/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$package" "$package" >"$shlib/debian/control"
depends=$(cd "$shlib" && dpkg-shlibdeps "${shlibdeps_options[@]}" -O -e"$tree/usr/bin/replenish-agent" 2>"$staging/shlibdeps.log" |
  sed -n 's/^shlibs:Depends=//p') || { cat "$staging/shlibdeps.log" >&2; exit 1; }
[[ -n "$depends" ]] || { echo "dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# adduser makes the system user in postinst; the rest comes from the binary.
depends="adduser, $depends"

installed_size=$(du -k -s --exclude=DEBIAN "$tree" | cut -f1)
# (sed's replacement: & and | escaped; the Homepage line is left out when there is none.)
maintainer_sed=$(printf '%s' "$maintainer" | sed 's/[&|\\]/\\&/g')
homepage_line=$(printf '%s' "${homepage:+Homepage: $homepage\n}" | sed 's/[&|]/\\&/g')
sed -e "s/@VERSION@/$DEB_VERSION/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" \
  -e "s/@SIZE@/$installed_size/" -e "s|@MAINTAINER@|$maintainer_sed|" -e "s|@HOMEPAGE@|$homepage_line|" \
  packaging/debian/control.in >"$tree/DEBIAN/control"
chmod 0644 "$tree/DEBIAN/control"
(cd "$tree" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$tree/DEBIAN/md5sums"
chmod 0644 "$tree/DEBIAN/md5sums"

mkdir -p "$out"
deb="$out/${package}_${DEB_VERSION}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$tree" "$deb" >/dev/null
echo "built $deb"
echo "Depends: $depends"
