# Sourced (not run) by every script that installs Debian packages, so the README's rule lives here once: a
# script installs the apt packages it needs when they are missing, as root when it runs as root, through sudo
# otherwise; with neither it says which packages it needs and that root is needed, and fails.
#
#   apt_install PACKAGE…          installs those of the packages that are not installed
#   apt_need_commands CMD=PKG…    checks that each command exists; names the missing ones with their package
#                                 and installs those packages

# apt_installed PACKAGE: whether dpkg has it installed.
apt_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# apt_as_root COMMAND…: COMMAND as root (itself when root, else through sudo). Without sudo, says that root is
# needed for what $apt_what names, and fails.
apt_as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "${0##*/}: installing ${apt_what:-packages} needs root: run this as root (or install sudo), or first: apt-get install ${apt_what:-}" >&2
    return 1
  fi
}

apt_install() {
  local missing=() package
  for package in "$@"; do apt_installed "$package" || missing+=("$package"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local apt_what="${missing[*]}" how="apt-get"
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && how="sudo apt-get"
  echo "== installing ${missing[*]} ($how)"
  # The lock timeout: another installer (test.sh's background steps) may hold apt's lock for a while.
  apt_as_root apt-get update -qq || return 1
  apt_as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null || {
    echo "${0##*/}: apt-get install ${missing[*]} failed" >&2
    return 1
  }
}

apt_need_commands() {
  local pair packages=() names=()
  for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null 2>&1 && continue
    names+=("${pair%%=*} (package ${pair#*=})")
    packages+=("${pair#*=}")
  done
  [ ${#packages[@]} -eq 0 ] && return 0
  echo "${0##*/}: missing: ${names[*]}" >&2
  # shellcheck disable=SC2046
  apt_install $(printf '%s\n' "${packages[@]}" | sort -u) || return 1
  # Installed now, or a package said installed without its command (a broken install, a PATH without it).
  for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null 2>&1 && continue
    echo "${0##*/}: ${pair%%=*} is still missing although ${pair#*=} is installed: check PATH, or reinstall: apt-get install --reinstall ${pair#*=}" >&2
    return 1
  done
}
