#!/usr/bin/env bash
# Prints the fleet simulation's table: 10,000 devices back from one power cut in the same second, scheduled
# by the agent's own rules (Tests/ReplenishAgentTests/FleetSimulationTests.swift), requests per minute.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests >/dev/null
swift test --skip-build --filter FleetSimulationTests 2>&1 | sed -n '/^FLEET-SIM/,/^peak \/ mean/p'
