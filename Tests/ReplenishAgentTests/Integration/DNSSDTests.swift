import Foundation
import Testing

@testable import ReplenishAgent

/// The pairing port's DNS-SD advertisement through a real avahi-daemon (issue 41, points 3 and 5). mDNS is
/// multicast on the network, so the daemon, its system bus, the emulator and the agent all run in a network
/// namespace of the test's own with only `lo` (and a private `/run`): nothing leaves the machine. Without
/// `unshare` (not root, or a container that forbids it) or without avahi-daemon the test is skipped, saying so.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct DNSSDTests {
    /// A network namespace with only `lo`, a private mount namespace (for `/run`), and a PID namespace whose end
    /// (the script's, or its kill by a timeout) ends every process started in it, with a `/proc` of its own
    /// (`--mount-proc`): with the machine's, a thread's id in the namespace names another process or none there,
    /// and libdispatch's thread-pool monitor, which reads `/proc/<thread id>/stat` of its workers once a second
    /// while work waits, stops the program (SIGILL, `replenish-companion` among them) when the file is missing.
    static let namespace = [
        "--net", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--mount-proc",
    ]

    /// Why the namespace test cannot run here, or nil.
    static let unavailable: String? = {
        for tool in ["/usr/bin/unshare", "/usr/sbin/avahi-daemon", "/usr/bin/avahi-browse", "/usr/bin/dbus-daemon"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (apt-get install avahi-daemon avahi-utils dbus)"
        }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = namespace + ["true"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return "unshare cannot run" }
        probe.waitUntilExit()
        return probe.terminationStatus == 0 ? nil : "unshare --net --mount is not permitted here (root is needed)"
    }()

    /// The start of every script run in the namespace (arguments: the bin directory, the harness's directory, the
    /// agent's config): `lo` up with multicast, a private `/run`, a system bus (its pid in `dbus.pid`), avahi's
    /// config (`avahi.conf`; the daemon is started by the script), `poll` (a condition, at most 10 s), `browse`
    /// (the resolved `_replenish._tcp` lines, or nothing) and `companion_pairs` (the companion's pairing).
    static let setup = #"""
        set -u
        bin=$1 dir=$2 config=$3
        ip link set lo up && ip link set lo multicast on || exit 90
        mount -t tmpfs tmpfs /run && mkdir -p /run/dbus /run/avahi-daemon || exit 91
        # (Daemons get no descriptor of the test's pipes: a forked daemon holding one would keep the test waiting.)
        dbus-daemon --system --fork --print-pid >"$dir/dbus.pid" 2>/dev/null </dev/null || exit 92
        printf '[server]\nuse-ipv6=no\nallow-interfaces=lo\n[publish]\npublish-workstation=no\n' >"$dir/avahi.conf"
        poll() { for _ in $(seq 100); do eval "$1" && return 0; sleep 0.1; done; return 1; }
        browse() { avahi-browse -rpt _replenish._tcp 2>/dev/null | grep '^=' || true; }
        # The pairing with the label's payload $1: replenish-companion finds the device by DNS-SD; the emulator's
        # LWA consents at once, and curl plays the browser that follows LWA's redirect to the redirect URI.
        companion_pairs() {
          "$bin/replenish-companion" --setup "$1" --client-id amzn1.application-oa2-client.emulator \
            --authorize-url http://127.0.0.1:8641/ap/oa --redirect-port 8643 >"$dir/companion-ns.log" 2>&1 </dev/null &
          local companion=$! url location
          poll 'grep -q "consent at: " "$dir/companion-ns.log"'
          url=$(sed -n 's/.*consent at: //p' "$dir/companion-ns.log")
          location=$(curl -s -o /dev/null -w '%{redirect_url}' "$url")
          curl -s -o /dev/null "$location"
          wait "$companion"; echo "companion exit $?"
          cat "$dir/companion-ns.log"
        }

        """#

    /// The script run in the namespace after `setup`: the daemon's appearance, restart and the pairing, with a
    /// marker line before each look (`== name`). Every wait is bounded (`poll`, 10 s).
    static let script = #"""
        payload=$4
        "$bin/replenish-emulator" serve --listen 127.0.0.1:8641 --slots slot-1 >"$dir/emulator-ns.log" 2>&1 </dev/null &
        emulator=$!
        "$bin/replenish-agent" run --config "$config" >"$dir/agent-ns.log" 2>&1 </dev/null &
        agent=$!
        cleanup() { kill "$agent" "$emulator" 2>/dev/null; avahi-daemon -k 2>/dev/null; kill "$(cat "$dir/dbus.pid")"; }
        trap cleanup EXIT
        poll '(exec 3<>/dev/tcp/127.0.0.1/8642) 2>/dev/null' || { echo "no pairing port"; exit 93; }
        poll '"$bin/replenish-agent" status --config "$config" | grep -q "DNS-SD: not advertised"'
        echo "== without daemon"; "$bin/replenish-agent" status --config "$config" | grep DNS-SD
        avahi-daemon -f "$dir/avahi.conf" --no-drop-root --no-chroot -D >/dev/null 2>&1 </dev/null || exit 94
        poll '[ -n "$(browse)" ]'
        echo "== daemon appeared"; browse
        poll '"$bin/replenish-agent" status --config "$config" | grep -q "DNS-SD: advertised"'
        "$bin/replenish-agent" status --config "$config" | grep DNS-SD
        avahi-daemon -k; poll '! avahi-daemon -c'
        avahi-daemon -f "$dir/avahi.conf" --no-drop-root --no-chroot -D >/dev/null 2>&1 </dev/null || exit 95
        poll '[ -n "$(browse)" ]'
        echo "== daemon restarted"; browse
        echo "== pairing"; companion_pairs "$payload"
        sleep 1
        echo "== one second later"; browse
        # The window closed at the pairing: libavahi-client and what it pulled in are unloaded (dlclose).
        echo "== mapped after the pairing"; grep -o 'libavahi-[a-z]*\|libdbus-1\|libsystemd' "/proc/$agent/maps" | sort -u
        echo "== end"
        """#

    @Test(.enabled(if: unavailable == nil, "\(unavailable ?? "")"))
    func theWindowIsAdvertisedWhileOpenThroughDaemonRestartsAndWithdrawnAtACompanionsPairing() throws {
        let harness = Harness()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:8641", pairingPort: 8642, setupKey: true)
        let scriptPath = harness.directory + "/dnssd.sh"
        try (Self.setup + Self.script).write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let run = try harness.run(
            "/usr/bin/unshare",
            Self.namespace + [
                "/bin/bash", scriptPath, Harness.binDirectory,
                harness.directory, config, try #require(harness.setupPayload),
            ], timeout: 120)
        let output = run.output
        func section(_ name: String) -> String { Self.section(name, of: output) }
        #expect(run.status == 0, "\(run.status): \(output) \(run.error)")
        #expect(section("without daemon").contains("DNS-SD: not advertised: no avahi-daemon"), "\(output)")
        let id = PairingAdvertisement.id(serial: "TEST0001")
        for name in ["daemon appeared", "daemon restarted"] {
            let listed = section(name)
            #expect(listed.contains(";_replenish._tcp;local;"), "\(name): \(output)")
            #expect(listed.contains(";8642;"), "\(name): \(output)")
            #expect(
                listed.contains("\"v=2\"") && listed.contains("\"id=\(id)\"") && listed.contains("\"md=model-1\""),
                "\(name): \(output)")
            #expect(!listed.contains("TEST0001"), "the serial itself is not on the network")
        }
        #expect(output.contains("DNS-SD: advertised as _replenish._tcp on port 8642"), "\(output)")
        let pairing = section("pairing")
        #expect(pairing.contains("companion exit 0"), "\(output)")
        #expect(pairing.contains("at http://127.0.0.1:8642 proved the label's key"), "found by DNS-SD: \(output)")
        #expect(pairing.contains("replenish-companion: device TEST0001 paired"), "\(output)")
        #expect(section("one second later").trimmingCharacters(in: .whitespacesAndNewlines) == "", "\(output)")
        #expect(section("mapped after the pairing").isEmpty, "libavahi-client unloaded: \(output)")
        let log = harness.read("agent-ns.log")
        #expect(log.contains("pairing port advertised by DNS-SD") && log.contains("pairing port withdrawn from DNS-SD"))
        let leakedKey = log.contains(try #require(harness.setupKey).hex)
        #expect(!leakedKey, "the setup key reached the agent's log")
    }

    /// The lines of `output` after the marker `== name`, up to the next marker.
    static func section(_ name: String, of output: String) -> String {
        var lines: [Substring] = []
        var inside = false
        for line in output.split(separator: "\n") {
            if line.hasPrefix("== ") {
                inside = line == "== \(name)"
            } else if inside {
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }
}
