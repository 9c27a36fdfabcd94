.PHONY: demo test bench build format deb

# Runs the agent end to end on the simulated board against the emulator.
demo:
	bash scripts/demo.sh

# Runs every test (CI runs exactly this).
test:
	bash scripts/test.sh

# Prints the footprint and idle figures quoted in the README (IDLE=seconds of idle measured).
bench:
	bash scripts/bench.sh $(IDLE)

build:
	swift build

format:
	swift format --in-place --recursive Sources Tests Package.swift

# Builds .build/deb/replenish-agent_<version>_<arch>.deb (static Swift stdlib; the build machine's arch).
deb:
	bash scripts/deb.sh
