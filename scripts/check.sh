#!/usr/bin/env bash
# `make check`: the contributor's loop, and the first part of scripts/test.sh. The format lint, the tests' build
# with no compiler warning allowed, every Swift suite (unit, process and soak) and the docs check; then the
# stage table. No packages, no VMs, no arm64: scripts/test.sh runs those, and CI runs scripts/test.sh.
#
#   scripts/check.sh            run it (installs the build's and the tests' Debian packages when missing)
#
# scripts/test.sh sources this file for `check_stages`.

# lint_sources: swift format lint --strict with the checked-in .swift-format, and every suite tagged .unit or
# .process (scripts/unit-tests.sh refuses one with neither: the arm64 run under qemu-aarch64 takes only .unit
# suites, so an untagged one would fail there, at the end of the run, instead of here in its first minute).
lint_sources() {
  swift format lint --strict --recursive Sources Tests Package.swift cloud/Sources cloud/Tests cloud/Package.swift && bash scripts/unit-tests.sh --list >/dev/null
}

# build_without_warnings: `swift build --build-tests` in the tests' build folder (tests_scratch), failing on any compiler warning in the project's own files
# (repeated warnings once buried real failures). A clean clone compiles every file and so prints every warning;
# an up-to-date build prints none, so this cannot miss one in CI. The committed Package.resolved pins every
# package: with --only-use-versions-from-resolved-file a Package.swift whose dependencies no longer match it fails
# here ("an out-of-date resolved file was detected"): run `swift package resolve` and commit the file.
#
# With REPLENISH_TESTS_BUILD_NICE (scripts/test.sh sets it to the background's level) the build runs in a
# session of its own at that nice (scripts/weighed.sh), weighed as the background stages beside it are; the
# suites after it keep the foreground's weight. An interrupt or a stop of the run ends that session too (it is out
# of the terminal's process group).
build_without_warnings() {
  local build_log status=0 build=(swift build --build-tests --scratch-path "$(tests_scratch)" --only-use-versions-from-resolved-file) pid
  build_log=$(mktemp)
  if [ -n "${REPLENISH_TESTS_BUILD_NICE:-}" ]; then
    # setsid does not fork here (a background job is no group leader): $! is the new session's id.
    setsid bash scripts/weighed.sh "$REPLENISH_TESTS_BUILD_NICE" "${build[@]}" >"$build_log" 2>&1 &
    pid=$!
    trap 'kill -TERM -- "-$pid" 2>/dev/null' INT TERM
    wait "$pid" || status=$?
    trap - INT TERM
  else
    "${build[@]}" >"$build_log" 2>&1 || status=$?
  fi
  if [ "$status" -ne 0 ]; then
    cat "$build_log"
    rm -f "$build_log"
    return "$status"
  fi
  grep -vE '^\[[0-9]+/[0-9]+\]' "$build_log" | tail -n 3
  # The project's files by their folder, not by $PWD (the compiler prints the real path, which differs from
  # $PWD under a symlink); the packages' checkouts under .build*/ are not the project's.
  if grep -E "/(Sources|Tests)/[^:]*:[0-9]+:[0-9]+: warning:" "$build_log" | grep -vE "/\.build[^/]*/" | sort -u | grep .; then
    rm -f "$build_log"
    echo "FAIL: the build printed the compiler warnings above" >&2
    return 1
  fi
  rm -f "$build_log"
}

# check_stages [COMMAND…]: the stages; COMMAND (scripts/test.sh's: start the amd64 package's build in the
# background) runs once the tests' build is done, before the suites.
check_stages() {
  stage "swift format lint --strict (the checked-in .swift-format)" lint_sources
  stage "Package.resolved pins what Package.swift needs (swift package resolve --only-use-versions-from-resolved-file)" \
    swift package resolve --only-use-versions-from-resolved-file
  stage "swift build --build-tests (debug; no compiler warning in Sources/ or Tests/)" build_without_warnings
  [ $# -eq 0 ] || "$@"
  stage "swift test: every suite (unit, process, soak)" swift test --skip-build --scratch-path "$(tests_scratch)"
  stage "docs: links, subcommands in code blocks, benchmark figures (scripts/check-docs.sh)" bash scripts/check-docs.sh
  stage "the test command's cache: kept, checked, rebuilt when corrupt or stale (scripts/cache-test.sh)" bash scripts/cache-test.sh
}

# The tests' build folder (tests_scratch: .build-tests, a link into the test command's cache).
. "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  . scripts/stages.sh
  stage_begin "scripts/check.sh"
  stage "packages for the build and the tests (scripts/install-deps.sh --tests)" scripts/install-deps.sh --tests
  check_stages
fi
