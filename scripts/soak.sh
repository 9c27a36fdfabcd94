#!/usr/bin/env bash
# The soak test on its own: N presses (default 1000) across 3 slots, 30 % seeded faults, random SIGKILLs.
# Prints "presses, orders placed, lost, duplicated, hidden resends, wasted calls". Hidden resends are replenish
# requests the emulator received for which the agent logged no attempt. Usage: scripts/soak.sh [PRESSES] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
SOAK_PRESSES=${1:-1000} SOAK_SEED=${2:-20261122} swift test --filter 'SoakTests/pressesAreNeverLost' 2>&1 \
  | grep -E "^soak:|✘|✔ Test run|Test run with|error" 
