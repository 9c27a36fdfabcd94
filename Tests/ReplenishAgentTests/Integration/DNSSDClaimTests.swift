import Foundation
import Testing

@testable import ReplenishAgent

/// Two services that claim the label's id (issue 50, item 3): the id is no secret (SHA-256 of the serial), so
/// an impostor can advertise it too. Here the impostor is a relay in front of the real device (it turns the
/// challenge's method to `plain`), advertised under a host name whose address is IPv6 (`::1`) though avahi lists
/// it on an IPv4 line. `replenish-companion` must say that two services claim the id, reach the impostor by a
/// bracketed address, refuse it, and pair with the device that proves the key, whichever avahi lists first. In
/// the DNS-SD test's own namespaces (`DNSSDTests`).
@Suite(.serialized, .onOwnThread, .tags(.process)) struct DNSSDClaimTests {
    /// The script run in the namespace after `DNSSDTests.setup`.
    static let script = #"""
        payload=$4 id=$5 relay=$6
        avahi-daemon -f "$dir/avahi.conf" --no-drop-root --no-chroot -D >/dev/null 2>&1 </dev/null || exit 94
        "$bin/replenish-emulator" serve --listen 127.0.0.1:8641 --slots slot-1 >"$dir/emulator-ns.log" 2>&1 </dev/null &
        emulator=$!
        "$bin/replenish-agent" run --config "$config" >"$dir/agent-ns.log" 2>&1 </dev/null &
        agent=$!
        # The impostor: a relay on [::1]:8650 in front of the device, its host name's address IPv6.
        python3 "$relay" 8650 http://127.0.0.1:8642 "$dir/relayed.log" --plain --bind ::1 >"$dir/relay.log" 2>&1 </dev/null &
        impostor=$!
        avahi-publish -a -R impostor.local ::1 >/dev/null 2>&1 </dev/null &
        address=$!
        avahi-publish -s -H impostor.local "Replenish impostor" _replenish._tcp 8650 v=2 "id=$id" md=model-1 \
          >/dev/null 2>&1 </dev/null &
        service=$!
        cleanup() {
          kill "$agent" "$emulator" "$impostor" "$address" "$service" 2>/dev/null; avahi-daemon -k 2>/dev/null
          kill "$(cat "$dir/dbus.pid")"
        }
        trap cleanup EXIT
        poll '[ "$(browse | wc -l)" -ge 2 ]' || { echo "not two services"; browse; exit 93; }
        echo "== listed"; browse
        echo "== pairing"; companion_pairs "$payload"
        echo "== relayed"; cat "$dir/relayed.log" 2>/dev/null
        echo "== end"
        """#

    @Test(.enabled(if: DNSSDTests.unavailable == nil, "\(DNSSDTests.unavailable ?? "")"))
    func theCompanionTriesEveryServiceThatClaimsTheIdUntilOneProvesTheKey() throws {
        let harness = Harness()
        let config = try harness.writeConfig(emulator: "http://127.0.0.1:8641", pairingPort: 8642, setupKey: true)
        // The device listens on both families: avahi may resolve its host name to 127.0.0.1 or to ::1.
        let text = try String(contentsOfFile: config, encoding: .utf8)
        let dualStack = text.replacingOccurrences(of: #""listen":"127.0.0.1:8642""#, with: #""listen":"[::]:8642""#)
        #expect(dualStack != text)
        try dualStack.write(toFile: config, atomically: true, encoding: .utf8)
        let scriptPath = harness.directory + "/claims.sh"
        try (DNSSDTests.setup + Self.script).write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let id = PairingAdvertisement.id(serial: "TEST0001")
        let run = try harness.run(
            "/usr/bin/unshare",
            DNSSDTests.namespace + [
                "/bin/bash", scriptPath, Harness.binDirectory, harness.directory, config,
                try #require(harness.setupPayload), id, packageRoot() + "/Tests/ReplenishAgentTests/Fixtures/relay.py",
            ], timeout: 120)
        let output = run.output
        #expect(run.status == 0, "\(run.status): \(output) \(run.error)")
        // Both claim the id; the impostor's address is IPv6 on an IPv4 line, and the companion brackets it.
        let impostorLine = ";IPv4;Replenish\\032impostor;_replenish._tcp;local;impostor.local;::1;8650;"
        #expect(output.contains(impostorLine), "\(output)")
        #expect(
            output.contains("2 services claim this label's id (") && output.contains("http://[::1]:8650"), "\(output)")
        #expect(
            output.contains("device TEST0001 (model model-1) at http://127.0.0.1:8642 proved the label's key")
                || output.contains("device TEST0001 (model model-1) at http://[::1]:8642 proved the label's key"),
            "\(output)")
        #expect(output.contains("companion exit 0"), "\(output)")
        #expect(output.contains("replenish-companion: device TEST0001 paired"), "\(output)")
        // When the impostor was asked (avahi listed it first), it was refused for its method, and it never saw the
        // customer's code.
        let relayed = output.components(separatedBy: "== relayed").last ?? ""
        if relayed.contains("GET /provision/deviceInfo") {
            #expect(output.contains("http://[::1]:8650: the answer's codeChallengeMethod is plain, not S256"))
        }
        #expect(!relayed.contains("companionInfo"), "\(output)")
        let log = harness.read("agent-ns.log")
        let leakedKey = log.contains(try #require(harness.setupKey).hex)
        #expect(!leakedKey, "the setup key reached the agent's log")
    }
}
