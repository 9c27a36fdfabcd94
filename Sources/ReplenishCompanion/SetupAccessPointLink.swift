import Foundation

/// This machine on a device's setup access point, through NetworkManager's `nmcli`: a profile of its own
/// (`replenish-setup-<id>`, never connected automatically) for the access point's name, activated with the
/// label's passphrase from a 0600 file (`passwd-file`; the passphrase is on no command line), and deleted when
/// the companion leaves, fails or is interrupted.
struct SetupAccessPointLink {
    let profile: String
    private let interrupts: Interrupts

    static func join(label: Label, interface: String?) throws -> SetupAccessPointLink {
        let ssid = "Replenish-\(label.serviceID.prefix(4))"
        let profile = "replenish-setup-\(label.serviceID)"
        let passphrase = String(try label.hmac("replenish-wifi-v1 passphrase\n\(label.serviceID)").prefix(32))
        _ = try? nmcli(["connection", "delete", "id", profile])  // left by a run that was killed
        let onInterface = interface.map { ["ifname", $0] } ?? []
        let file = try secretFile("802-11-wireless-security.psk:\(passphrase)\n")
        defer { unlink(file) }
        try nmcli(
            ["connection", "add", "type", "wifi", "con-name", profile] + onInterface
                + ["ssid", ssid, "wifi-sec.key-mgmt", "wpa-psk", "connection.autoconnect", "no"])
        let interrupts = Interrupts {
            unlink(file)
            leave(profile)
        }
        let link = SetupAccessPointLink(profile: profile, interrupts: interrupts)
        say("joining the device's setup access point \(ssid)")
        do { try nmcli(["connection", "up", "id", profile] + onInterface + ["passwd-file", file]) } catch {
            link.leave()
            throw Failure(
                "cannot join the setup access point \(ssid) (is the device in setup mode, in range?): \(error)")
        }
        return link
    }

    /// Deletes the profile, which leaves the access point; NetworkManager goes back to the usual network.
    func leave() {
        Self.leave(profile)
        interrupts.cancel()
    }

    private static func leave(_ profile: String) { _ = try? nmcli(["connection", "delete", "id", profile]) }

    /// A new file only this user can read (mkstemp's 0600) holding `text`; its path.
    private static func secretFile(_ text: String) throws -> String {
        let folder = FileManager.default.temporaryDirectory
        var template = Array(folder.appendingPathComponent("replenish-setup-XXXXXX").path.utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw Failure("cannot create a file in \(folder.path)") }
        defer { close(descriptor) }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let bytes = Array(text.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else {
            unlink(path)
            throw Failure("cannot write \(path)")
        }
        return path
    }

    /// Runs `nmcli` (found on PATH) with `arguments`, standard input closed so that it never prompts; its output,
    /// or a Failure with its last line.
    @discardableResult
    private static func nmcli(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["nmcli"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        let missing = Failure(
            "cannot run nmcli (NetworkManager's command line tool); "
                + "on a machine already on the access point, give --device URL"
        )
        do { try process.run() } catch { throw missing }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus != 127 else { throw missing }
        guard process.terminationStatus == 0 else {
            let last = text.split(separator: "\n").last.map(String.init) ?? "status \(process.terminationStatus)"
            throw Failure("nmcli connection \(arguments[1]): \(last)")
        }
        return text
    }
}
