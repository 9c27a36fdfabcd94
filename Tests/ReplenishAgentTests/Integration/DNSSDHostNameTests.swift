import Foundation
import Testing

@testable import ReplenishAgent

/// Two units of one image on one network (issue 51, point 5): both hosts are named `unit`, so avahi-daemon on
/// the second renames it (`unit-2.local`). The phone resolves each unit's service to the host name avahi
/// published and to an IPv6 link-local address, and names them in its requests' Host: each unit must take its
/// published name and its link-local address with the phone's zone past the Host check (a path that is no
/// endpoint then answers 404, and starts no pairing session), and still refuse another name (421).
///
/// Two test hosts: network namespaces joined by a veth pair with IPv6 link-local addresses only, each with its
/// own UTS name, system bus, avahi-daemon and agent, inside the DNS-SD tests' outer namespaces (`DNSSDTests`):
/// nothing leaves the machine.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct DNSSDHostNameTests {
    /// One host: `$1` its netns, `$2` its interface, `$3` the agent's config, `$4` a folder for its files; then
    /// (host A only) the checks. Every wait is bounded (`poll`, 20 s).
    static let script = #"""
        set -u
        bin=$1 dir=$2 config_a=$3 config_b=$4
        mount -t tmpfs tmpfs /run || exit 90
        ip link set lo up
        ip netns add a && ip netns add b || exit 91
        ip link add va type veth peer name vb && ip link set va netns a && ip link set vb netns b || exit 92
        host() { # NAME IFACE CONFIG CHECKS
          ip netns exec "$1" unshare --uts --mount --propagation private bash -c '
            name=$1 iface=$2 config=$3 bin=$4 dir=$5 checks=$6
            hostname unit; ip link set lo up; ip link set "$iface" up; ip link set "$iface" multicast on
            mount -t tmpfs tmpfs /run && mkdir -p /run/dbus /run/avahi-daemon || exit 93
            dbus-daemon --system --fork --print-pid >"$dir/dbus-$name.pid" 2>/dev/null </dev/null || exit 94
            printf "[server]\nuse-ipv4=no\nuse-ipv6=yes\nallow-interfaces=$iface\n[publish]\npublish-workstation=no\n" >"$dir/avahi-$name.conf"
            poll() { for _ in $(seq 200); do eval "$1" && return 0; sleep 0.1; done; return 1; }
            # The link-local address must be past duplicate address detection before avahi-daemon starts.
            poll "ip -6 addr show dev $iface scope link | grep -q inet6 && ! ip -6 addr show dev $iface | grep -q tentative"
            avahi-daemon -f "$dir/avahi-$name.conf" --no-drop-root --no-chroot -D >/dev/null 2>&1 </dev/null || exit 95
            "$bin/replenish-agent" run --config "$config" >"$dir/agent-$name.log" 2>&1 </dev/null &
            agent=$!
            trap "kill $agent; avahi-daemon -k; kill \$(cat $dir/dbus-$name.pid)" EXIT
            if [ "$checks" = yes ]; then
              browse() { avahi-browse -rpt _replenish._tcp 2>/dev/null | grep "^=" || true; }
              poll "[ \"\$(browse | wc -l)\" -ge 2 ]" || { echo "not two services"; browse; exit 96; }
              sleep 1
              echo "== listed"; browse
              echo "== hosts"
              browse | while IFS=";" read -r _ _ _ service _ _ published address port _; do
                for h in "$published" "$published:$port" "[$address%25$iface]:$port" "[$address%$iface]" unit-9.local; do
                  code=$(curl -s -o /dev/null -w "%{http_code}" -H "Host: $h" -g "http://[$address%25$iface]:$port/")
                  echo "host $service $h $code"
                done
              done
              echo "== end"
            else
              sleep 40
            fi
          ' host "$1" "$2" "$3" "$bin" "$dir" "$4"
        }
        host b vb "$config_b" no &
        other=$!
        sleep 2   # b names itself unit.local first; a finds the name taken and becomes unit-2.local
        host a va "$config_a" yes
        status=$?
        kill "$other" 2>/dev/null
        exit $status
        """#

    @Test(.enabled(if: DNSSDTests.unavailable == nil, "\(DNSSDTests.unavailable ?? "")"))
    func twoUnitsNamedAlikeEachServeThePublishedNameAndTheirLinkLocalAddress() throws {
        let harness = Harness()
        var configs: [String] = []
        for (index, serial) in ["UNITA0001", "UNITB0001"].enumerated() {
            let path = try harness.writeConfig(emulator: "http://127.0.0.1:1", pairingPort: 8642)
            let text = try String(contentsOfFile: path, encoding: .utf8)
                .replacingOccurrences(of: #""listen":"127.0.0.1:8642""#, with: #""listen":"[::]:8642""#)
                .replacingOccurrences(of: "TEST0001", with: serial)
                .replacingOccurrences(of: harness.directory + "/state", with: harness.directory + "/state-\(index)")
                .replacingOccurrences(of: harness.directory + "/run", with: harness.directory + "/run-\(index)")
            let own = harness.directory + "/agent-\(index).json"
            try text.write(toFile: own, atomically: true, encoding: .utf8)
            configs.append(own)
        }
        let scriptPath = harness.directory + "/hostnames.sh"
        try Self.script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let run = try harness.run(
            "/usr/bin/unshare",
            DNSSDTests.namespace + ["/bin/bash", scriptPath, Harness.binDirectory, harness.directory] + configs,
            timeout: 120)
        let output = run.output
        #expect(run.status == 0, "\(run.status): \(output) \(run.error)")
        // Both units, one of them under the name avahi gave it after the conflict.
        #expect(output.contains(";unit.local;") && output.contains(";unit-2.local;"), "\(output)")
        let lines = output.split(separator: "\n").filter { $0.hasPrefix("host ") }
        #expect(lines.count == 10, "\(output)")
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 4 else { continue }
            let (host, code) = (fields[2], fields[3])
            if host == "unit-9.local" {
                #expect(code == "421", "another name: \(line)")
            } else {
                #expect(code == "404", "past the Host check, a path that is no endpoint: \(line)\n\(output)")
            }
        }
    }
}
