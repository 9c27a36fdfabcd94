import Foundation

/// The home network's passphrase: the first line of `--passphrase-file`, or typed at a prompt on the terminal
/// with its echo off (one line of standard input when that is not a terminal). Never an argument of this or any
/// other program (any local user can read those in /proc), and never printed.
enum Passphrase {
    static func read(file: String?, ssid: String) throws -> String {
        let passphrase: String
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw Failure("cannot read the passphrase file \(file)")
            }
            var line = Array(data.prefix { $0 != UInt8(ascii: "\n") })
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            passphrase = String(decoding: line, as: UTF8.self)
        } else {
            passphrase = try prompt("passphrase of \(WiFiCommand.shown(ssid)): ")
        }
        if let problem = problem(passphrase) { throw Failure(problem) }
        return passphrase
    }

    /// Why the device would refuse `passphrase` (as it checks it: 8 to 63 printable ASCII characters, or 64 hex
    /// digits, a raw key), or nil.
    static func problem(_ passphrase: String) -> String? {
        let printable = passphrase.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
        let rawKey =
            passphrase.utf8.count == 64 && passphrase.unicodeScalars.allSatisfy { $0.properties.isASCIIHexDigit }
        guard rawKey || (printable && (8...63).contains(passphrase.utf8.count)) else {
            return "a WPA passphrase is 8 to 63 printable ASCII characters, or 64 hex digits (or give --open)"
        }
        return nil
    }

    /// One line typed with the terminal's echo off (restored afterwards, also on Ctrl-C), or one line of
    /// standard input when it is not a terminal.
    private static func prompt(_ text: String) throws -> String {
        guard isatty(STDIN_FILENO) == 1 else {
            guard let line = readLine(strippingNewline: true) else {
                throw Failure("no passphrase on standard input: give --passphrase-file FILE, or --open")
            }
            return line
        }
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { throw Failure("cannot read the terminal's settings") }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        FileHandle.standardError.write(Data(text.utf8))
        let original = saved
        let restore: @Sendable () -> Void = {
            var settings = original
            tcsetattr(STDIN_FILENO, TCSANOW, &settings)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        let interrupts = Interrupts(cleanup: restore)
        tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
        defer {
            restore()
            interrupts.cancel()
        }
        guard let line = readLine(strippingNewline: true) else { throw Failure("no passphrase typed") }
        return line
    }
}

/// Until `cancel()`, SIGINT and SIGTERM run `cleanup` and end the program (status 130 or 143) instead of ending
/// it at once: the terminal's echo comes back, the setup access point's profile goes.
struct Interrupts {
    private let sources: [any DispatchSourceSignal]

    init(cleanup: @escaping @Sendable () -> Void) {
        sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                cleanup()
                exit(128 + number)
            }
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
