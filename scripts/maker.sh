#!/usr/bin/env bash
# Prints the package's Maintainer on the first line and its Homepage (possibly empty) on the second, from
# packaging/maker.conf, the environment (DEB_MAINTAINER, DEB_HOMEPAGE; then DEBFULLNAME and DEBEMAIL) or git's
# identity, in that order; says on stderr where the maintainer came from. Used by scripts/deb.sh and
# scripts/check-deb.sh, so the package and its check agree.
set -euo pipefail
cd "$(dirname "$0")/.."
MAINTAINER="" HOMEPAGE=""
# shellcheck source=/dev/null
. packaging/maker.conf
maintainer=${DEB_MAINTAINER:-$MAINTAINER} source=packaging/maker.conf
[ -n "${DEB_MAINTAINER:-}" ] && source=DEB_MAINTAINER
if [ -z "$maintainer" ] && [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
  maintainer="$DEBFULLNAME <$DEBEMAIL>" source="DEBFULLNAME and DEBEMAIL"
fi
if [ -z "$maintainer" ]; then
  name=$(git config user.name 2>/dev/null || true) email=$(git config user.email 2>/dev/null || true)
  [ -n "$name" ] && [ -n "$email" ] && maintainer="$name <$email>" source="git config user.name and user.email"
fi
if ! [[ "$maintainer" =~ ^[^\<\>]+\ \<[^\<\>@\ ]+@[^\<\>\ ]+\>$ ]]; then
  echo "maker.sh: no maintainer of the form 'Name <address>' (found '${maintainer}' in $source): set MAINTAINER in packaging/maker.conf" >&2
  exit 1
fi
homepage=${DEB_HOMEPAGE:-$HOMEPAGE}
if [[ "$maintainer $homepage" == *example.com* ]]; then
  echo "maker.sh: example.com is a placeholder, not a maker (packaging/maker.conf)" >&2
  exit 1
fi
if [ -n "$homepage" ] && ! [[ "$homepage" =~ ^https?://[^\ ]+$ ]]; then
  echo "maker.sh: HOMEPAGE '$homepage' is not an http(s) URL (packaging/maker.conf)" >&2
  exit 1
fi
echo "package maintainer from $source: $maintainer" >&2
printf '%s\n%s\n' "$maintainer" "$homepage"
