#!/usr/bin/env bash
# The maker's cloud under load on this machine: how many unit reports one copy of replenish-cloud (release build)
# applies per second, each with the InventoryConsumed event it makes sent to the emulator's Alexa event gateway,
# PostgreSQL and the gateway on the same 2 cores. A bounded run on loopback: wrk (Debian's package) for SECONDS
# with CONNECTIONS connections, reporting for UNITS claimed units of one customer with a grant (bench/cloud-load.lua).
# The mutual TLS terminator is left out: the certificate's subject is the header a load balancer sets.
#
# Usage: scripts/cloud-load.sh [SECONDS [CONNECTIONS [UNITS]]]   (defaults 20 16 10000)
# Prints the reports applied per second (counted in the database), wrk's latency percentiles, and the events the
# gateway took.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/apt.sh
. scripts/cache.sh
. scripts/postgres.sh
apt_install postgresql wrk
seconds=${1:-20}
connections=${2:-16}
units=${3:-10000}

work=$(mktemp -d /tmp/replenish-cloud-load.XXXXXX)
postgres_start "$work"
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  postgres_stop
}
trap stop_all EXIT

echo "== builds: replenish-cloud (release), the emulator (the tests' debug build)"
scratch=$(cached_scratch "$root/cloud/.build-release" cloud-release "$(swift --version 2>&1 | head -n 1)" 2>/dev/null)
(cd cloud && swift build -c release --product replenish-cloud --scratch-path "$scratch" 2>&1 | tail -n 1)
cloud=$scratch/release/replenish-cloud
tests=$(tests_scratch)
swift build --product replenish-emulator --scratch-path "$tests" 2>&1 | tail -n 1
emulator_bin=$tests/debug/replenish-emulator

"$emulator_bin" serve --listen 127.0.0.1:0 --port-file "$work/emulator.port" >"$work/emulator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/emulator.port" ] && break; sleep 0.1; done
emulator=http://127.0.0.1:$(cat "$work/emulator.port")

database="postgres://replenish@localhost/load?host=$work"
psql "$postgres_url" -q -c "CREATE DATABASE load"
cp cloud/deploy/catalogue.example.json "$work/catalogue.json"
echo "== $units units registered"
for thread in 0 1; do
  for ((n = 0; n < units / 2; n++)); do printf 'LOAD%d%05d 00112233445566778899aabbccddeeff coffee-1\n' "$thread" "$n"; done
done >"$work/units.txt"
"$cloud" register "$work/units.txt" --database "$database" --catalogue "$work/catalogue.json" >/dev/null

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
REPLENISH_CLOUD_CLIENT_ID=skill-client REPLENISH_CLOUD_CLIENT_SECRET=skill-secret LOG_LEVEL=warning \
  "$cloud" serve --port "$port" --database "$database" --catalogue "$work/catalogue.json" \
  --gateway "$emulator/v3/events" --lwa-token-url "$emulator/auth/o2/token" --lwa-profile-url "$emulator/user/profile" \
  --send-interval 1 >"$work/cloud.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

# One customer with the skill enabled (a grant) holds every unit.
link=$(curl -fsS -d '{"customer":"amzn1.account.LOAD"}' "$emulator/admin/skill/link" | jq -r .token)
code=$(curl -fsS -d '{"customer":"amzn1.account.LOAD"}' "$emulator/admin/skill/grant" | jq -r .code)
curl -fsS -d "{\"directive\":{\"header\":{\"namespace\":\"Alexa.Authorization\",\"name\":\"AcceptGrant\",\"messageId\":\"m\",\"payloadVersion\":\"3\"},\"payload\":{\"grant\":{\"type\":\"OAuth2.AuthorizationCode\",\"code\":\"$code\"},\"grantee\":{\"type\":\"BearerToken\",\"token\":\"$link\"}}}}" \
  "http://127.0.0.1:$port/events" | jq -e '.event.header.name == "AcceptGrant.Response"' >/dev/null
psql "$database" -q -c "INSERT INTO bindings (unit, customer) SELECT unit, 'amzn1.account.LOAD' FROM units"

echo "== wrk: $seconds s, $connections connections, 2 threads, $units units"
UNITS=$units wrk -t2 -c"$connections" -d"${seconds}s" --latency -s bench/cloud-load.lua "http://127.0.0.1:$port" |
  tee "$work/wrk.log" | grep -E "Latency|50%|90%|99%|Requests/sec|requests in|Non-2xx|Socket errors"
applied=$(psql "$database" -tA -c "SELECT count(*) FROM reports")
sleep 3 # the schedule's last passes over what is queued
queued=$(psql "$database" -tA -c "SELECT count(*) FROM events")
taken=$(curl -fsS "$emulator/admin/gateway" | jq '.accepted | length')
echo "cloud-load: $applied reports applied in $seconds s: $((applied / seconds)) reports/s (one copy, release build, 2 cores shared with PostgreSQL, the gateway and wrk)"
echo "cloud-load: $taken InventoryConsumed events taken by the gateway, $queued still queued 3 s after the load"
