#!/usr/bin/env bash
# The maker's cloud (cloud/, replenish-cloud), tested offline:
#   - its build without warnings, and its suites on a real PostgreSQL server this script starts
#     (scripts/postgres.sh: Debian's postgresql, a private folder, a Unix socket only);
#   - the chain end to end: the agent in program alexa → nginx with mutual TLS → two copies of the service on
#     one database → the emulator's Alexa event gateway and LWA (CloudEndToEndTests, in the agent's tests);
#   - every Alexa message the suites saw the service write, and every event the gateway took, against Amazon's
#     published schema (scripts/alexa-schema-check.py, jsonschema from PyPI);
#   - cfn-lint (PyPI) on the deployment template (cloud/deploy/replenish-cloud.yaml).
# Stops the server on any exit.
#
#   scripts/cloud-test.sh            all of it
#   scripts/cloud-test.sh --filter X the cloud's suites matching X only (swift test --filter), then the rest
#
# REPLENISH_CLOUD_KEEP_MESSAGES=DIR keeps the messages the schema check read in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/apt.sh
. scripts/cache.sh
apt_install postgresql

# The server: its folder and socket are private to this run (scripts/postgres.sh).
. scripts/postgres.sh
work=$(mktemp -d /tmp/replenish-cloud-test.XXXXXX)
keep_messages() {
  [ -n "${REPLENISH_CLOUD_KEEP_MESSAGES:-}" ] && cp -r "$work/messages/." "$REPLENISH_CLOUD_KEEP_MESSAGES/" 2>/dev/null
  return 0
}
postgres_on_stop=keep_messages
postgres_start "$work"
export REPLENISH_CLOUD_TEST_DATABASE=$postgres_url
export REPLENISH_CLOUD_TEST_MESSAGES=$work/messages
mkdir -p "$REPLENISH_CLOUD_TEST_MESSAGES"
[ "$(id -u)" -eq 0 ] && chmod 0777 "$REPLENISH_CLOUD_TEST_MESSAGES"

# The build: its packages compiled once per compiler and cloud/Package.resolved (scripts/cache.sh).
scratch=$(cached_scratch "$root/cloud/.build" cloud-debug "$(swift --version 2>&1 | head -n 1)" 2>/dev/null)
cd cloud
swift build --build-tests --scratch-path "$scratch" >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; echo "cloud-test: the build failed" >&2; exit 1; }
if grep -E "error|warning: " "$work/build.log" | grep -v "swift-distributed-tracing"; then
  echo "cloud-test: the build has warnings" >&2
  exit 1
fi
status=0
swift test --skip-build --scratch-path "$scratch" "$@" >"$work/test.log" 2>&1 || status=$?
# The failures and the summary; the whole log when the run ended without one (a crash).
{ grep -E "✘|Fatal error|error:" "$work/test.log" | tail -n 40; grep -E "Test run with" "$work/test.log"; } ||
  tail -n 60 "$work/test.log"
[ "$status" -eq 0 ] || exit "$status"
cd "$root"

# The chain end to end (Tests/ReplenishAgentTests/Integration/CloudEndToEndTests.swift): the agent's tests' build
# (scripts/test.sh has built it by now; alone, this builds it), its one suite that needs the cloud's binary and
# this database server. Skipped elsewhere, so here it must have run and passed.
tests=$(tests_scratch)
swift build --build-tests --scratch-path "$tests" >"$work/tests-build.log" 2>&1 ||
  { tail -n 40 "$work/tests-build.log" >&2; echo "cloud-test: the agent's tests' build failed" >&2; exit 1; }
e2e_status=0
REPLENISH_CLOUD_BINARY=$scratch/debug/replenish-cloud swift test --skip-build --scratch-path "$tests" \
  --filter CloudEndToEndTests >"$work/e2e.log" 2>&1 || e2e_status=$?
grep -E "✘|Fatal error|error:|Test run with" "$work/e2e.log" | tail -n 20 || true
if [ "$e2e_status" -ne 0 ] || ! grep -qE "✔ Test aPressIsOneInventoryConsumed.*passed" "$work/e2e.log"; then
  # Its harness's folder (agent, copies, nginx and emulator logs) stays in /tmp: the run's last lines name it.
  echo "cloud-test: the end-to-end test did not pass; its last lines:" >&2
  tail -n 40 "$work/e2e.log" >&2
  exit 1
fi

# Amazon's schema, on every message the suites saw the service write and the gateway took.
# jsonschema and cfn-lint from PyPI, in a virtual environment kept in the cache (made again when a pin changes).
pins=(jsonschema==4.23.0 cfn-lint==1.51.0)
venv=$work/venv
[ "$cache_root" != off ] && venv=$cache_root/python-$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-12)
if ! [ -x "$venv/bin/cfn-lint" ] || ! "$venv/bin/python" -c 'import jsonschema' >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" ||
    { echo "cloud-test: pip install ${pins[*]} failed" >&2; exit 1; }
fi
"$venv/bin/python" scripts/alexa-schema-check.py cloud/Tests/AlexaSchema "$REPLENISH_CLOUD_TEST_MESSAGES"
# The deployment template, with cfn-lint's informational checks too (a stateful resource without its deletion
# policy fails).
"$venv/bin/cfn-lint" --include-checks I -- cloud/deploy/replenish-cloud.yaml
echo "cloud-test: cfn-lint $("$venv/bin/cfn-lint" --version | awk '{ print $2 }'): cloud/deploy/replenish-cloud.yaml passes"
