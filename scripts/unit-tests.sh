#!/usr/bin/env bash
# The fast run for a developer: the suites tagged `.unit` (Tests/ReplenishAgentTests/Support/Tags.swift: in
# this process only, manual clocks and doubles), without the `.process` and `.soak` suites that start the agent
# and the emulator. CI runs everything (scripts/test.sh). swift-testing's command line filters by name, not by
# tag, so the tag is read from the `@Suite(…, .tags(.unit…)) struct Name` declarations here.
#   scripts/unit-tests.sh          build the tests if needed, run the unit suites
#   scripts/unit-tests.sh --list   print the unit suites' names, one a line
set -euo pipefail
cd "$(dirname "$0")/.."

unit_suites() {
  grep -rhoE '^@Suite\(.*\.tags\(\.unit[^)]*\)\) struct [A-Za-z0-9_]+' Tests |
    awk '{ print $NF }' | sort -u
}

# Every suite says what it needs: one with neither tag would silently leave the fast run.
untagged=$(grep -rhE '^@Suite' Tests | grep -vE '\.tags\(\.(unit|process)' || true)
[ -z "$untagged" ] || { echo "suites tagged neither .unit nor .process:" >&2; echo "$untagged" >&2; exit 1; }

case "${1:-}" in
--list) unit_suites; exit 0 ;;
esac
suites=$(unit_suites)
[ -n "$suites" ] || { echo "no suite is tagged .unit" >&2; exit 1; }
echo "== unit suites: $(echo "$suites" | wc -l)"
swift build --build-tests 2>&1 | tail -n 1
exec swift test --skip-build --filter "^ReplenishAgentTests\.($(echo "$suites" | paste -sd'|'))/"
