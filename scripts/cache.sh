# A cache outside the clone for what the test command downloads and builds that does not depend on the commit:
# the arm64 toolchain (sid chroot with Debian's Swift, the aarch64 runtime, the trixie sysroot), the chroot that
# cross-builds the arm64 gpio-sim module, and the booted devices' root file systems; and the builds'
# scratch folders (the tests' debug build and the release builds), whose pinned packages a clean clone then does not compile again (cached_scratch, at the end).
# Sourced, not run.
#
# An entry is one tar file and its SHA-256, named by a key: the SHA-256 of the part's recipe (the script text
# and package lists that make it) and of the InRelease file of every Debian suite it is made from, read from the
# mirror at each use. A new recipe or a new archive state is a new key; the entries of older keys are deleted
# when a new one is written. An entry whose tar does not match its SHA-256 (a cut-short write, a flipped bit)
# is deleted and the part is made again; nothing from it is used.
#
# REPLENISH_TEST_CACHE   the cache's folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/replenish-agent-test);
#                        `off`: no cache (what CI's clean machine sees anyway). `rm -rf` of it is always safe.
#
# The test command takes no longer without it; with it, a second run on the same machine skips the parts above.

cache_root=${REPLENISH_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/replenish-agent-test}

cache_say() { echo "cache: $*"; }

# cache_key RECIPE SUITE_LINE…: prints the key of a part made by RECIPE (text) from the suites named by the
# sources lines ("deb URL SUITE COMPONENT…"); fails (no caching) when the cache is off or a suite's InRelease
# cannot be read.
cache_key() {
  [ "$cache_root" != off ] || return 1
  local recipe=$1 line url suite release
  shift
  {
    printf '%s\n' "$recipe"
    for line in "$@"; do
      read -r _ url suite _ <<<"$line"
      release=$(curl -fsS --max-time 30 "$url/dists/$suite/InRelease" | sha256sum | cut -c1-64) || return 1
      [ "$release" != "$(printf '' | sha256sum | cut -c1-64)" ] || return 1
      printf '%s %s %s\n' "$url" "$suite" "$release"
    done
  } | sha256sum | cut -c1-32
}

# cache_restore NAME KEY DIR: 0 when DIR (which must not exist) was made from the entry NAME at KEY, after its
# tar matched its SHA-256; 1 otherwise (no entry, or a corrupt one, which is deleted).
# The tar is read once: unpacked into DIR.tmp while its SHA-256 is computed (the arm64 toolchain's 5 GB took 45 s
# to hash and 14 s more to unpack when read twice); DIR.tmp becomes DIR only when both succeeded.
cache_restore() {
  local name=$1 key=$2 dir=$3 entry=$cache_root/$1/$2 sum untarred
  [ -n "$key" ] && [ -f "$entry.tar" ] && [ -f "$entry.sha256" ] || return 1
  rm -rf "$dir.tmp" "$dir.untarred" && mkdir -p "$dir.tmp"
  # The command substitution ends when tar's subshell has ended too (it holds the same output), so its status
  # file is written by then.
  sum=$(tee >(tar -x --numeric-owner --xattrs --xattrs-include='*' -C "$dir.tmp" -f - && echo ok >"$dir.untarred") \
    <"$entry.tar" 2>/dev/null | sha256sum | cut -c1-64)
  untarred=$(cat "$dir.untarred" 2>/dev/null)
  rm -f "$dir.untarred"
  if [ "$sum" != "$(cat "$entry.sha256")" ]; then
    rm -rf "$dir.tmp"
    cache_say "$name: the entry $key does not match its SHA-256: deleted, made again"
    rm -f "$entry.tar" "$entry.sha256"
    return 1
  fi
  if [ "$untarred" != ok ]; then
    rm -rf "$dir.tmp"
    cache_say "$name: the entry $key does not unpack: deleted, made again"
    rm -f "$entry.tar" "$entry.sha256"
    return 1
  fi
  mv "$dir.tmp" "$dir"
  cache_say "$name: from ${entry#"$HOME"/}.tar (SHA-256 checked)"
}

# cache_store NAME KEY DIR: DIR as the entry NAME at KEY (written under a temporary name, then renamed, the
# checksum last); the entries of NAME's other keys are deleted. A failure to write is reported, not fatal.
cache_store() {
  local name=$1 key=$2 dir=$3 folder=$cache_root/$1 sum
  [ -n "$key" ] || return 0
  mkdir -p "$folder" || return 0
  rm -f "$folder"/*.tar "$folder"/*.sha256 "$folder"/*.tmp
  if sum=$(tar -c --numeric-owner --xattrs --xattrs-include='*' -C "$dir" . | tee "$folder/$key.tar.tmp" | sha256sum | cut -c1-64) &&
    [ -s "$folder/$key.tar.tmp" ]; then
    mv "$folder/$key.tar.tmp" "$folder/$key.tar"
    echo "$sum" >"$folder/$key.sha256.tmp" && mv "$folder/$key.sha256.tmp" "$folder/$key.sha256"
    cache_say "$name: kept in ${folder#"$HOME"/}/$key.tar ($(du -m "$folder/$key.tar" | cut -f1) MB)"
  else
    rm -f "$folder/$key.tar.tmp"
    cache_say "$name: could not be kept in $folder (not needed: the next run makes it again)"
  fi
}

# cache_store_later NAME KEY DIR: cache_store of a hard-linked copy of DIR, in the background, for a part whose
# store should not delay what comes next (the arm64 toolchain: the builds wait for it). The copy is made now
# (metadata only); nothing writes in place into DIR's files after (chroots and trees are only added to), so
# the entry is DIR as it is now. Where a hard-linked copy cannot be made (another file system), it is stored now.
cache_store_later() {
  local name=$1 key=$2 dir=$3 staging
  [ -n "$key" ] || return 0
  mkdir -p "$cache_root/$name" || return 0
  staging=$cache_root/$name/.staging
  rm -rf "$staging"
  if cp -al "$dir" "$staging" 2>/dev/null; then
    (cache_store "$name" "$key" "$staging" && rm -rf "$staging") &
  else
    rm -rf "$staging"
    cache_store "$name" "$key" "$dir"
  fi
}

# cached_scratch DIR NAME TOOLCHAIN: the scratch folder DIR of a Swift build (a folder of the clone, such as
# .build-deb), made a link to the cache's folder builds/NAME; prints the folder to give SwiftPM (the link's
# target). SwiftPM names every file of a build by the scratch folder's path as given, so one path whatever the
# clone's lets a clean clone find the pinned packages' modules that an earlier run compiled; the repository's own
# modules are always compiled again (their sources are the clone's, at another path). The folder is emptied when
# its key changes: the SHA-256 of TOOLCHAIN (the compiler's version line: a module compiled by another compiler
# cannot be imported) and of Package.resolved. DIR is used as it is, and nothing is linked, when the cache is off
# or DIR is a folder already (an earlier build's).
cached_scratch() {
  local dir=$1 name=$2 toolchain=$3 folder key
  if [ "$cache_root" = off ] || { [ -d "$dir" ] && [ ! -L "$dir" ]; }; then
    mkdir -p "$dir" && readlink -f "$dir"
    return
  fi
  folder=$cache_root/builds/$name
  key=$({ printf '%s\n' "$toolchain"; cat "$(dirname "$dir")/Package.resolved"; } | sha256sum | cut -c1-32)
  mkdir -p "$folder" || { mkdir -p "$dir" && readlink -f "$dir"; return; }
  if [ "$(cat "$folder/.replenish-key" 2>/dev/null)" != "$key" ]; then
    find "$folder" -mindepth 1 -delete
    echo "$key" >"$folder/.replenish-key"
    cache_say "builds/$name: a new compiler or new pins (key $key): the packages are compiled afresh" >&2
  else
    cache_say "builds/$name: the pinned packages as an earlier run compiled them (key $key)" >&2
  fi
  ln -sfn "$folder" "$dir"
  readlink -f "$dir"
}

# tests_scratch: the scratch folder of the tests' debug build (`swift build --build-tests`, the suites, the
# emulator and the companion the booted amd64 device runs): .build-tests, a link into the cache's builds as the
# release builds' are. Run from the repository's root.
tests_scratch() {
  cached_scratch "$PWD/.build-tests" debug-amd64 "$(swift --version 2>&1 | head -n 1)" 2>/dev/null
}
