/// Each unit's own serial: a maker flashes one image (one `agent.json`) onto thousands of units, so the serial
/// can come from outside the config. Exactly one of:
/// - `device.serial`: the serial itself (a config per unit);
/// - `device.serialFile`: a file the factory writes on each unit (`/etc/replenish-agent/serial`; relative paths
///   are relative to the config file), holding the serial and optionally a line break;
/// - `device.serialSource: "device-tree"`: the board's own serial number (`/proc/device-tree/serial-number` on a
///   Raspberry Pi, NUL-terminated).
/// Whatever the source, the serial must be 1 to 50 characters of `A-Z a-z 0-9` (the DRS integration guide's rule).
extension AgentConfig {
    /// Where the unit's serial came from (`status` and `check-config` say it).
    enum SerialSource: Sendable, Equatable {
        /// `device.serial` in the config.
        case config
        /// `device.serialFile`: the file read (resolved against the config's folder).
        case file(String)
        /// `device.serialSource: "device-tree"`: the file read.
        case deviceTree(String)

        /// `config`, `file` or `device-tree` (`status --json`'s `serialSource`).
        var name: String {
            switch self {
            case .config: "config"
            case .file: "file"
            case .deviceTree: "device-tree"
            }
        }

        /// The file the serial was read from, nil when it is in the config.
        var file: String? {
            switch self {
            case .config: nil
            case .file(let path), .deviceTree(let path): path
            }
        }

        /// `device.serial in the config`, `device.serialFile /etc/replenish-agent/serial`, ….
        var describe: String {
            switch self {
            case .config: "device.serial in the config"
            case .file(let path): "device.serialFile \(path)"
            case .deviceTree(let path): "the device tree (\(path))"
            }
        }
    }

    /// Where the board's serial number is looked for, in order: the Raspberry Pi's `/proc/device-tree` (a link
    /// into sysfs), then the same file in sysfs, which the unit's `ProcSubset=pid` leaves visible when it hides
    /// `/proc/device-tree`.
    static let deviceTreeSerialPaths = [
        "/proc/device-tree/serial-number", "/sys/firmware/devicetree/base/serial-number",
    ]

    /// The rule every serial passes, whatever its source.
    static let serialRule = "must be 1 to 50 characters of A-Z a-z 0-9 (the DRS integration guide's rule)"

    /// Reads `device.serial`, `device.serialFile` and `device.serialSource` from `reader` (the `device` object) and
    /// returns the serial and its source, or nil with the problems recorded (naming the key and the file).
    static func readSerial(
        _ reader: inout ObjectReader, configDirectory: String, deviceTreeSerialPaths: [String],
        problems: inout Problems
    ) -> (serial: String, source: SerialSource)? {
        let before = problems.lines.count
        let inline = reader.string("serial", required: false, problems: &problems)
        let file = reader.string("serialFile", required: false, problems: &problems)
        let sourceName = reader.string("serialSource", required: false, problems: &problems)
        guard problems.lines.count == before else { return nil }  // a wrong type, already said

        let given = [
            inline.map { _ in "device.serial" }, file.map { _ in "device.serialFile" },
            sourceName.map { _ in "device.serialSource" },
        ].compactMap { $0 }
        guard given.count == 1 else {
            if given.isEmpty {
                problems.add(
                    "device.serial",
                    "is required: the serial itself, or instead device.serialFile (a per-unit file the factory writes) or device.serialSource \"device-tree\" (the board's serial number)"
                )
            } else {
                problems.add(
                    given[1], "cannot be combined with \(given[0]): give the serial one way only"
                )
            }
            return nil
        }

        if let inline {
            guard isValidSerial(inline) else {
                problems.add("device.serial", serialRule)
                return nil
            }
            return (inline, .config)
        }
        if let file {
            let resolved = POSIX.join(configDirectory, file)
            guard let serial = readSerialFile(resolved, key: "device.serialFile", problems: &problems) else {
                return nil
            }
            return (serial, .file(resolved))
        }
        guard sourceName == "device-tree" else {
            problems.add(
                "device.serialSource",
                "must be \"device-tree\" (the board's own serial number), found \"\(sourceName ?? "")\"; for a file use device.serialFile"
            )
            return nil
        }
        for path in deviceTreeSerialPaths {
            do {
                guard try POSIX.status(path) != nil else { continue }
            } catch {
                problems.add("device.serialSource", error.message)
                return nil
            }
            guard let serial = readSerialFile(path, key: "device.serialSource", problems: &problems) else { return nil }
            return (serial, .deviceTree(path))
        }
        problems.add(
            "device.serialSource",
            "no device-tree serial number at \(deviceTreeSerialPaths.joined(separator: " or ")) (not a Raspberry Pi or a board that has one?); use device.serialFile or device.serial"
        )
        return nil
    }

    /// The serial read again from where it came from at the start (`SerialSettling` re-reads a serial in doubt):
    /// the serial, or the problem as `check-config` says it. A serial in the config reads as it is.
    static func readSerial(again source: SerialSource, configured: String) -> Result<String, SerialProblem> {
        var problems = Problems()
        let serial: String?
        switch source {
        case .config: return .success(configured)
        case .file(let path): serial = readSerialFile(path, key: "device.serialFile", problems: &problems)
        case .deviceTree(let path): serial = readSerialFile(path, key: "device.serialSource", problems: &problems)
        }
        if let serial { return .success(serial) }
        return .failure(SerialProblem(message: problems.lines.joined(separator: "; ")))
    }

    /// Why a serial could not be read again.
    struct SerialProblem: Error {
        var message: String
    }

    /// The serial in a per-unit file: its text without trailing NULs (the device tree ends its strings with
    /// one), line breaks and blanks, checked against the serial rule.
    private static func readSerialFile(_ path: String, key: String, problems: inout Problems) -> String? {
        guard
            let bytes = problems.readFile(
                path, key: key, missing: "no such file \(path) (the factory writes each unit's serial there)",
                limit: 4096)
        else { return nil }
        let trimmed = bytes.reversed().drop { [0x00, 0x0A, 0x0D, 0x20, 0x09].contains($0) }.reversed()
        let serial = String(decoding: trimmed, as: UTF8.self)
        guard isValidSerial(serial) else {
            let shown =
                trimmed.isEmpty
                ? "nothing"
                : trimmed.count <= 60 && trimmed.allSatisfy({ (0x20...0x7E).contains($0) })
                    ? "\"\(serial)\"" : "\(trimmed.count) bytes that are not all printable"
            problems.add(key, "\(path) holds \(shown), not a serial: \(serialRule)")
            return nil
        }
        return serial
    }
}
