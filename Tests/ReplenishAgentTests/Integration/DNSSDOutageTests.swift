import Foundation
import Testing

@testable import ReplenishAgent

/// The pairing port's DNS-SD advertisement when avahi-daemon stops answering (SIGSTOP) or the system bus restarts,
/// in the namespace of `DNSSDTests` (its own `lo`, system bus and avahi-daemon; skipped where that cannot run).
/// Every stop of the agent stays within its 10 s, and a lost bus is named and gets over.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct DNSSDOutageTests {
    /// What the scripts add to `DNSSDTests.setup`: avahi-daemon started (its pid in `$daemon`), and helpers.
    static let helpers = #"""
        start_daemon() { avahi-daemon -f "$dir/avahi.conf" --no-drop-root --no-chroot -D >/dev/null 2>&1 </dev/null; }
        start_daemon || exit 94
        daemon=$(cat /run/avahi-daemon/pid)
        # `poll` for at most $1 seconds (of the clock: an avahi-browse takes a while).
        poll_for() {
          local end=$((SECONDS + $1))
          while [ $SECONDS -lt $end ]; do eval "$2" && return 0; sleep 0.1; done
          return 1
        }
        agent() { "$bin/replenish-agent" run --config "$config" >>"$dir/agent-ns.log" 2>&1 </dev/null & agent=$!; }
        dnssd() { "$bin/replenish-agent" status --config "$config" | grep DNS-SD; }
        advertised() { poll_for 20 'dnssd | grep -q "DNS-SD: advertised"' || echo "never advertised"; }
        # SIGTERM to the agent's exit, in milliseconds.
        stop() {
          local started=$EPOCHREALTIME code ended
          kill -TERM "$agent"; wait "$agent"; code=$?
          ended=$EPOCHREALTIME
          echo "stop $(( (${ended/./} - ${started/./}) / 1000 )) ms, exit $code"
        }
        trap 'kill -CONT "$daemon" 2>/dev/null' EXIT

        """#

    /// The agent stopped while the window is open: with the daemon answering, then hung (SIGSTOP) while the
    /// service is advertised, then hung before the window opens (the client's first call waits for it).
    static let stops = #"""
        echo "== answering"
        agent; advertised; stop
        sleep 1
        echo "== answering, one second later"; browse
        echo "== hung"
        agent; advertised
        kill -STOP "$daemon"; stop; kill -CONT "$daemon"
        sleep 1
        echo "== hung, one second after it answers again"; browse
        echo "== hung at the window's start"
        kill -STOP "$daemon"
        agent; poll '(exec 3<>/dev/tcp/127.0.0.1/8642) 2>/dev/null' || echo "no pairing port"
        sleep 1
        stop; kill -CONT "$daemon"
        echo "== end"
        """#

    /// The system bus stops while the service is advertised (avahi-daemon exits with it, as it does when its bus
    /// goes), then both start again.
    static let busRestart = #"""
        agent; advertised
        echo "== advertised"; dnssd
        # SIGKILL, a crash: dbus-daemon keeps the signal mask it was started with, in which the test's thread
        # blocks SIGTERM (its SigBlk has bit 14 set). It leaves its socket, which the next dbus-daemon replaces,
        # and its pid file.
        kill -KILL "$(cat "$dir/dbus.pid")"
        poll '! kill -0 "$(cat "$dir/dbus.pid")" 2>/dev/null' || echo "the bus did not stop"
        poll '! avahi-daemon -c' || echo "avahi-daemon did not stop"
        poll '! dnssd | grep -q "DNS-SD: advertised"'
        echo "== bus gone"; dnssd
        rm -f /run/dbus/pid
        dbus-daemon --system --fork --print-pid >"$dir/dbus.pid" 2>/dev/null </dev/null || exit 96
        start_daemon || exit 97
        # The agent tries again every 10 s.
        poll_for 30 '[ -n "$(browse)" ]'
        echo "== bus back"; browse; dnssd
        stop
        echo "== end"
        """#

    /// Runs `script` in the namespace with an unpaired agent whose pairing port is 8642.
    func run(_ script: String) throws -> (output: String, log: String) {
        let harness = Harness()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:8641", pairingPort: 8642)
        let scriptPath = harness.directory + "/dnssd.sh"
        try (DNSSDTests.setup + Self.helpers + script).write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let run = try harness.run(
            "/usr/bin/unshare",
            DNSSDTests.namespace + ["/bin/bash", scriptPath, Harness.binDirectory, harness.directory, config],
            timeout: 150)
        #expect(run.status == 0, "\(run.status): \(run.output) \(run.error)")
        return (run.output, harness.read("agent-ns.log"))
    }

    /// The milliseconds of the `stop … ms, exit 0` line of `section`, or nil when there is none.
    static func stopMilliseconds(_ section: String) -> Int? {
        for line in section.split(separator: "\n") where line.hasPrefix("stop ") && line.hasSuffix(" ms, exit 0") {
            return Int(line.dropFirst(5).prefix { $0 != " " })
        }
        return nil
    }

    @Test(.enabled(if: DNSSDTests.unavailable == nil, "\(DNSSDTests.unavailable ?? "")"))
    func everyStopStaysWithinTenSecondsAndWithdrawsTheServiceEvenWhenAvahiDaemonHangs() throws {
        let (output, log) = try run(Self.stops)
        func section(_ name: String) -> String { DNSSDTests.section(name, of: output) }
        for name in ["answering", "hung", "hung at the window's start"] {
            let milliseconds = Self.stopMilliseconds(section(name))
            print("stop: \(milliseconds.map(String.init) ?? "?") ms from SIGTERM to exit, avahi-daemon \(name)")
            #expect(milliseconds != nil, "\(name): \(output)\n\(log)")
            #expect((milliseconds ?? .max) < 10_000, "\(name): \(output)")
        }
        #expect(!section("answering").contains("never advertised") && !section("hung").contains("never advertised"))
        // Withdrawn when the daemon answers, and by the daemon itself once it answers again after a hang.
        #expect(section("answering, one second later").isEmpty, "\(output)")
        #expect(section("hung, one second after it answers again").isEmpty, "\(output)")
        #expect(log.contains("pairing port withdrawn from DNS-SD"), "\(log)")
    }

    @Test(.enabled(if: DNSSDTests.unavailable == nil, "\(DNSSDTests.unavailable ?? "")"))
    func aRestartedSystemBusIsNamedWhileGoneAndTheOpenWindowIsAdvertisedAgain() throws {
        let (output, _) = try run(Self.busRestart)
        func section(_ name: String) -> String { DNSSDTests.section(name, of: output) }
        #expect(section("advertised").contains("DNS-SD: advertised as _replenish._tcp on port 8642"), "\(output)")
        let gone = section("bus gone")
        #expect(gone.contains("DNS-SD: not advertised") && gone.contains("no system bus"), "\(output)")
        #expect(!gone.contains("Daemon not running"), "\(output)")
        let back = section("bus back")
        print("after the bus restart: \(back.split(separator: "\n").last { $0.hasPrefix("DNS-SD") } ?? "")")
        #expect(back.contains(";_replenish._tcp;local;") && back.contains(";8642;"), "\(output)")
        #expect(back.contains("DNS-SD: advertised as _replenish._tcp on port 8642"), "\(output)")
        #expect(Self.stopMilliseconds(back) != nil, "\(output)")
    }
}
