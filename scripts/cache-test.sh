#!/usr/bin/env bash
# The test command's cache (scripts/cache.sh) in a scratch folder: an entry comes back as it was kept; a corrupt,
# cut-short or unreadable entry is deleted and reported, nothing from it used; a new archive state or recipe is a new
# key; `off` keeps nothing. Run by scripts/check.sh (and so by scripts/test.sh). Exit 0 only if all hold.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
check() { # check NAME COMMAND…: COMMAND must succeed
  local name=$1
  shift
  if "$@" >"$scratch/out" 2>&1; then echo "ok   $name"; else
    echo "FAIL $name"
    sed 's/^/     /' "$scratch/out"
    failures=$((failures + 1))
  fi
}
not() { ! "$@"; }

REPLENISH_TEST_CACHE=$scratch/cache
. scripts/cache.sh
# A mirror on the file system (curl reads file:// URLs): one suite, whose InRelease the test changes.
mirror=file://$scratch/mirror
mkdir -p "$scratch/mirror/dists/trixie" "$scratch/part/sub"
echo "Date: one" >"$scratch/mirror/dists/trixie/InRelease"
echo "a part" >"$scratch/part/file"
ln -s file "$scratch/part/sub/link"
chmod 0750 "$scratch/part/sub"

key=$(cache_key "recipe 1" "deb $mirror trixie main")
check "a key is 32 hex digits" grep -Eqx '[0-9a-f]{32}' <<<"$key"
check "the same recipe and state give the same key" test "$(cache_key "recipe 1" "deb $mirror trixie main")" = "$key"
check "another recipe gives another key" test "$(cache_key "recipe 2" "deb $mirror trixie main")" != "$key"
check "no key when a suite's InRelease cannot be read" not cache_key "recipe 1" "deb $mirror sid main"

cache_store part "$key" "$scratch/part" >/dev/null
check "an entry is a tar and its SHA-256" test -s "$scratch/cache/part/$key.tar" -a -s "$scratch/cache/part/$key.sha256"
check "an entry comes back as kept" cache_restore part "$key" "$scratch/back"
check "  with its files, links and modes" diff -r --no-dereference "$scratch/part" "$scratch/back"
check "  and the folder's mode" test "$(stat -c %a "$scratch/back/sub")" = 750

rm -rf "$scratch/back"
printf 'X' | dd of="$scratch/cache/part/$key.tar" bs=1 seek=600 conv=notrunc status=none
check "a corrupt entry is not used" not cache_restore part "$key" "$scratch/back"
check "  the folder is not made, nor its temporary" test ! -e "$scratch/back" -a ! -e "$scratch/back.tmp"
check "  the entry is deleted" test ! -e "$scratch/cache/part/$key.tar"
check "  and the next restore misses" not cache_restore part "$key" "$scratch/back"

mkdir -p "$scratch/cache/part"
printf 'not a tar' >"$scratch/cache/part/$key.tar"
sha256sum <"$scratch/cache/part/$key.tar" | cut -c1-64 >"$scratch/cache/part/$key.sha256"
check "an entry that matches its SHA-256 but does not unpack is not used" not cache_restore part "$key" "$scratch/back"
check "  the folder is not made, nor its temporary" test ! -e "$scratch/back" -a ! -e "$scratch/back.tmp"
check "  the entry is deleted" test ! -e "$scratch/cache/part/$key.tar"

cache_store part "$key" "$scratch/part" >/dev/null
rm "$scratch/cache/part/$key.sha256"
check "an entry without its SHA-256 (a cut-short write) is not used" not cache_restore part "$key" "$scratch/back"

cache_store part "$key" "$scratch/part" >/dev/null
echo "Date: two" >"$scratch/mirror/dists/trixie/InRelease"
new_key=$(cache_key "recipe 1" "deb $mirror trixie main")
check "a new archive state gives a new key" test "$new_key" != "$key"
check "  which the old entry does not serve" not cache_restore part "$new_key" "$scratch/back"
cache_store part "$new_key" "$scratch/part" >/dev/null
check "  and keeping the new one deletes the old" test ! -e "$scratch/cache/part/$key.tar" -a -e "$scratch/cache/part/$new_key.tar"

cache_store_later later "$key" "$scratch/part" >/dev/null
wait
check "an entry kept in the background comes back as kept" cache_restore later "$key" "$scratch/later"
check "  with its files, links and modes" diff -r --no-dereference "$scratch/part" "$scratch/later"
check "  and no staging copy is left" test ! -e "$scratch/cache/later/.staging"

# A build's scratch folder (cached_scratch): a clone's folder linked into the cache, kept while the compiler and the
# pins stay, emptied when either changes.
clone=$scratch/clone
mkdir -p "$clone"
echo "pins 1" >"$clone/Package.resolved"
folder=$(cached_scratch "$clone/.build-x" x "compiler 1" 2>/dev/null)
check "a build folder is the cache's" test "$folder" = "$scratch/cache/builds/x"
check "  and the clone's folder a link to it" test -L "$clone/.build-x" -a "$(readlink -f "$clone/.build-x")" = "$folder"
echo "a module" >"$folder/module"
other=$scratch/clone2
mkdir -p "$other" && cp "$clone/Package.resolved" "$other/"
check "another clone, same compiler and pins: the earlier build's files are there" \
  test "$(cached_scratch "$other/.build-x" x "compiler 1" 2>/dev/null)" = "$folder" -a -e "$folder/module"
cached_scratch "$other/.build-x" x "compiler 2" >/dev/null 2>&1
check "another compiler: the folder is emptied" test ! -e "$folder/module" -a -e "$folder/.replenish-key"
echo "a module" >"$folder/module"
echo "pins 2" >"$other/Package.resolved"
cached_scratch "$other/.build-x" x "compiler 2" >/dev/null 2>&1
check "new pins: the folder is emptied" test ! -e "$folder/module"
mkdir -p "$clone/.build-y"
check "a clone's own folder is used as it is" \
  test "$(cached_scratch "$clone/.build-y" y "compiler 1" 2>/dev/null)" = "$clone/.build-y" -a ! -L "$clone/.build-y"

REPLENISH_TEST_CACHE=off
. scripts/cache.sh
check "off: no key, so nothing is kept or used" not cache_key "recipe 1" "deb $mirror trixie main"
check "off: a build folder stays in the clone" \
  test "$(cached_scratch "$clone/.build-z" z "compiler 1" 2>/dev/null)" = "$clone/.build-z" -a ! -L "$clone/.build-z"

[ "$failures" -eq 0 ] && echo "cache-test: all passed" || { echo "cache-test: $failures failed"; exit 1; }
