/// The checks of single values in `agent.json`: URLs, serials, model ids, slot ids and `HOST:PORT`.
extension AgentConfig {
    static func url(_ text: String?, at path: String, problems: inout Problems) -> EndpointURL? {
        guard let text else { return nil }
        do {
            return try EndpointURL(text)
        } catch {
            problems.add(path, error.message)
            return nil
        }
    }

    /// A serial number: alphanumeric, at most 50 characters (the DRS integration guide; stricter than the web
    /// guide, so a serial that passes is accepted by both).
    static func isValidSerial(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 50 && text.utf8.allSatisfy(isAlphanumeric)
    }

    /// A device model id: `A-Z a-z 0-9 - + _`, at most 64 (model ids are often UUIDs).
    static func isValidIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "_")
            }
    }

    /// Slot ids go into URL paths, so only RFC 3986 unreserved characters are allowed.
    static func isValidSlot(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 255
            && text.utf8.allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                    || $0 == UInt8(ascii: "~")
            }
    }

    /// `HOST:PORT` or `[IPv6]:PORT`.
    static func parseListen(_ text: String) -> Listen? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
            return nil
        }
        return Listen(host: host, port: port)
    }
}
