#!/usr/bin/env bash
# Writes Sources/CBuildInfo/commit.h: the commit and the package version that `replenish-agent --version`
# prints (Sources/CBuildInfo explains the target). Run by scripts/deb.sh and scripts/arm64.sh before they build;
# without it (a clean clone, a plain `swift build`) both read "unknown".
#
#   scripts/build-info.sh                    writes the header (only when its content changes)
#   scripts/build-info.sh package-version    prints the package version only
#
# The package version is the VERSION file plus `+<commits>.g<hash>` (every commit builds a newer package, so
# installing a later build over an earlier one is an upgrade), or DEB_VERSION from the environment as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
# safe.directory: arm64.sh and the VM scripts run as root in a clone owned by someone else.
git_() { git -c safe.directory="$PWD" "$@"; }

base=$(tr -d ' \n' <VERSION)
commit=unknown
package_version=${DEB_VERSION:-}
if git_ rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git_ rev-parse --short=12 HEAD)
  # Tracked files changed since the commit: the binary is not exactly that commit.
  git_ diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
  [[ -n "$package_version" ]] || package_version="$base+$(git_ rev-list --count HEAD).g$(git_ rev-parse --short=8 HEAD)"
fi
[[ -n "$package_version" ]] || package_version=$base

if [[ "${1:-}" == package-version ]]; then
  echo "$package_version"
  exit 0
fi

header=Sources/CBuildInfo/commit.h
content="// Written by scripts/build-info.sh; not committed.
#define CBUILDINFO_COMMIT \"$commit\"
#define CBUILDINFO_PACKAGE_VERSION \"$package_version\""
if [[ ! -f "$header" ]] || [[ "$(cat "$header")" != "$content" ]]; then
  printf '%s\n' "$content" >"$header"
  # A header that did not exist at the last build is in no dependency file: recompile its one user.
  touch Sources/CBuildInfo/cbuildinfo.c
fi
echo "build info: commit $commit, package version $package_version"
