.PHONY: demo check test bench build format deb arm64 arm64-test companion

# Runs the agent end to end on the simulated board against the emulator.
demo:
	bash scripts/demo.sh

# The contributor's loop: format lint, the build with no warning, every Swift suite, the docs check.
check:
	bash scripts/check.sh

# Runs every test (CI runs exactly this).
test:
	bash scripts/test.sh

# Prints the footprint and idle figures quoted in the README (IDLE=seconds of idle measured).
bench:
	bash scripts/bench.sh $(IDLE)

build:
	swift build

# The bench companion (docs/companion-app.md) for the laptop that pairs a device with a real Amazon account: built in
# release and installed as $(PREFIX)/bin/replenish-companion (`make companion PREFIX=$HOME/.local` needs no root).
PREFIX ?= /usr/local
companion:
	swift build -c release --product replenish-companion
	mkdir -p "$(PREFIX)/bin"
	install -m 0755 "$$(swift build -c release --show-bin-path)/replenish-companion" "$(PREFIX)/bin/"

format:
	swift format --in-place --recursive Sources Tests Package.swift cloud/Sources cloud/Tests cloud/Package.swift

# Builds .build/deb/replenish-agent_<version>_<arch>.deb (static Swift stdlib): the build machine's arch, or
# `make deb ARCH=arm64` for the devices (cross-built, Debian trixie arm64).
deb:
	ARCH=$(ARCH) bash scripts/deb.sh

# The arm64 device binary, cross-built with Debian's Swift (scripts/arm64.sh; needs root or sudo):
# .build-arm64/aarch64-unknown-linux-gnu/release/replenish-agent
arm64:
	bash scripts/arm64.sh build

# The unit suites built for arm64 and run under qemu-aarch64.
arm64-test:
	bash scripts/arm64.sh test
