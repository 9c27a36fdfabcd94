#!/usr/bin/env bash
# The maker's cloud (cloud/, replenish-cloud): its build without warnings and its suites against a real
# PostgreSQL server that this script starts (Debian's postgresql package: initdb into a private folder, a Unix
# socket only, no TCP port), then every Alexa message the suites saw the service write checked against Amazon's
# published schema (scripts/alexa-schema-check.py, with jsonschema from PyPI), and cfn-lint (PyPI) on the
# deployment template (cloud/deploy/replenish-cloud.yaml). Stops the server on any exit.
#
#   scripts/cloud-test.sh            build, suites, schema check
#   scripts/cloud-test.sh --filter X only the suites matching X (swift test --filter)
#
# REPLENISH_CLOUD_KEEP_MESSAGES=DIR keeps the messages the schema check read in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/apt.sh
. scripts/cache.sh
apt_install postgresql

# The server: its folder and socket are private to this run. PostgreSQL refuses to run as root, so as root it
# runs as the package's own user.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
work=$(mktemp -d /tmp/replenish-cloud-test.XXXXXX)
as_server=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$work"
  as_server=(runuser -u postgres --)
fi
stop_server() {
  [ -n "${REPLENISH_CLOUD_KEEP_MESSAGES:-}" ] && cp -r "$work/messages/." "$REPLENISH_CLOUD_KEEP_MESSAGES/" 2>/dev/null
  "${as_server[@]}" "$pg_bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap stop_server EXIT
"${as_server[@]}" "$pg_bin/initdb" -D "$work/data" -U replenish -A trust --no-sync >"$work/initdb.log" 2>&1 ||
  { cat "$work/initdb.log" >&2; exit 1; }
"${as_server[@]}" "$pg_bin/pg_ctl" -D "$work/data" -l "$work/server.log" -w -t 60 \
  -o "-c listen_addresses='' -k $work -p 5432 -c fsync=off -c max_connections=200" start >/dev/null ||
  { cat "$work/server.log" >&2; exit 1; }
export REPLENISH_CLOUD_TEST_DATABASE="postgres://replenish@localhost/postgres?host=$work"
export REPLENISH_CLOUD_TEST_MESSAGES=$work/messages
mkdir -p "$REPLENISH_CLOUD_TEST_MESSAGES"
[ "$(id -u)" -eq 0 ] && chmod 0777 "$REPLENISH_CLOUD_TEST_MESSAGES"

# The build: its packages compiled once per compiler and cloud/Package.resolved (scripts/cache.sh).
scratch=$(cached_scratch "$root/cloud/.build" cloud-debug "$(swift --version 2>&1 | head -n 1)" 2>/dev/null)
cd cloud
swift build --build-tests --scratch-path "$scratch" 2>&1 | tee "$work/build.log" | grep -E "error|warning: " |
  grep -v "swift-distributed-tracing" && { echo "cloud-test: the build has warnings or errors" >&2; exit 1; }
grep -q "Compiling\|Build complete\|Planning build" "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }
status=0
swift test --skip-build --scratch-path "$scratch" "$@" >"$work/test.log" 2>&1 || status=$?
# The failures and the summary; the whole log when the run ended without one (a crash).
{ grep -E "✘|Fatal error|error:" "$work/test.log" | tail -n 40; grep -E "Test run with" "$work/test.log"; } ||
  tail -n 60 "$work/test.log"
[ "$status" -eq 0 ] || exit "$status"
cd "$root"

# Amazon's schema, on every message the suites saw the service write.
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
