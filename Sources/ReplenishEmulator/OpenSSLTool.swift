import Foundation

/// Finds and runs the `openssl` command line tool (PKCE hashing and `make-ca`).
enum OpenSSLTool {
    /// `/usr/bin/openssl` when present, else the first `openssl` on `PATH`.
    static let path: String = {
        let candidates = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            return found
        }
        let searchPath = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for dir in searchPath.split(separator: ":") {
            let candidate = "\(dir)/openssl"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return "/usr/bin/openssl"
    }()

    /// Why an `openssl` run failed.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `openssl` with `arguments`, throwing with its standard error when it exits non-zero.
    static func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errorText = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: errorText, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "openssl \(arguments.first ?? "") failed: \(text)")
        }
    }
}
