import Foundation
import Testing

@testable import ReplenishAgent

/// The one typed C boundary: each C library is called from its own folder of `Sources/ReplenishAgent` (libcurl
/// from `Curl/`, libgpiod from `Gpiod/`, libcrypto from `Crypto/`, libavahi-client from `Avahi/`, libdbus-1 from
/// `NetworkManager/`, the C library's system calls from `System/`) and from nowhere else, and every unsafe pointer
/// use in the agent says why it is safe.
///
/// Imports alone do not show it: `NIOPosix` re-exports Glibc, so a file that imports it for SwiftNIO could call
/// `geteuid()` without importing Glibc. So the sources are also scanned for the C library's calls and constants.
@Suite(.tags(.unit)) struct BoundaryTests {
    static let sources = packageRoot() + "/Sources/ReplenishAgent"

    /// One Swift file of the agent: its path relative to `Sources/ReplenishAgent`, and its lines.
    struct SourceFile {
        var path: String
        var lines: [Substring]

        init(_ path: String, _ lines: [Substring]) {
            self.path = path
            self.lines = lines
        }

        var folder: String { path.split(separator: "/").first.map { $0 + "/" } ?? "" }
    }

    static let boundaryFolders = ["Curl/", "Gpiod/", "System/", "Crypto/", "Avahi/", "NetworkManager/"]

    /// The folders that may import each C module.
    static let allowedImports: [String: Set<String>] = [
        "CCurl": ["Curl/"], "CProcess": ["System/"], "CBuildInfo": ["Support/"], "CGpiod": ["Gpiod/"],
        "CCrypto": ["Crypto/"], "CAvahi": ["Avahi/"], "CNetworkManager": ["NetworkManager/"],
        "SystemPackage": ["System/"],
        "Glibc": ["System/", "Gpiod/"], "Musl": ["System/", "Gpiod/"], "Darwin": ["System/", "Gpiod/"],
    ]

    /// Names of the C libraries' own functions, types and constants (the shims' included), by prefix.
    static let cLibraryPrefixes = [
        "cnm_", "curl_", "CURLOPT_", "CURLE_", "CURLINFO_", "CURLU", "ccurl_", "gpiod_", "CGPIOD_", "EVP_", "SHA256_",
        "avahi_", "AVAHI_", "cavahi_", "CAVAHI_", "CRYPTO_",
        "Glibc.", "Darwin.", "Musl.",
    ]

    /// The C library's system calls and helpers the agent uses or might reach for (distinctive names only:
    /// `read`, `write`, `open`, `close` or `sleep` are also the names of the agent's own methods).
    static let systemCalls = [
        "errno", "getpid", "getppid", "geteuid", "getuid", "getegid", "getgid", "umask", "chmod", "fchmod", "fsync",
        "fdatasync", "unlink", "rmdir", "mkdir", "opendir", "readdir", "closedir", "lstat", "fstat", "flock",
        "ftruncate", "pread", "pwrite", "pipe", "pipe2", "socket", "sendto", "recvfrom", "getifaddrs",
        "freeifaddrs", "gethostname", "getenv", "setenv", "sigprocmask", "sigaction", "setrlimit", "getrlimit",
        "clock_gettime", "strerror", "usleep", "nanosleep", "fcntl", "dup2", "execve", "isatty", "inet_ntop",
        "inet_pton", "pthread_create", "pthread_join", "malloc", "memcpy",
    ]

    /// The C library's constants by their families: errno values, open flags, file types, signals, sockets,
    /// clocks, locks, poll and resource limits.
    static let systemConstants = try! NSRegularExpression(
        pattern:
            #"(?<![.\w])(E(INTR|NOENT|LOOP|ACCES|PERM|EXIST|ISDIR|NXIO|NODEV|AGAIN|WOULDBLOCK|NAMETOOLONG|MSGSIZE)|O_[A-Z]+|S_IF[A-Z]+|SIG[A-Z]{3,}|SIG_[A-Z]+|AF_[A-Z0-9]+|SOCK_[A-Z]+|MSG_[A-Z]+|CLOCK_[A-Z]+|LOCK_[A-Z]+|F_[A-Z]+|FD_CLOEXEC|POLL[A-Z]+|RLIMIT_[A-Z]+|INET6?_ADDRSTRLEN)\b"#
    )

    /// A call of one of `systemCalls` (`getpid(`), or `errno` read as a variable (not `.errno`, not a label).
    static let systemCallPattern = try! NSRegularExpression(
        pattern: #"(?<![.\w])(\#(systemCalls.joined(separator: "|")))\s*\(|(?<![.\w])(errno)\b(?!\s*:)"#)

    static let importPattern = try! NSRegularExpression(
        pattern:
            #"^\s*(@\w+(\([^)]*\))?\s+)*((public|internal|package|private|fileprivate)\s+)?import\s+((struct|class|enum|protocol|typealias|func|var|let)\s+)?(\w+)"#
    )

    /// Every Swift file of the agent.
    static func agentSources() throws -> [SourceFile] {
        let enumerator = try #require(FileManager.default.enumerator(atPath: sources))
        var files: [SourceFile] = []
        while let path = enumerator.nextObject() as? String {
            guard path.hasSuffix(".swift") else { continue }
            let text = try String(contentsOfFile: sources + "/" + path, encoding: .utf8)
            files.append(SourceFile(path, text.split(separator: "\n", omittingEmptySubsequences: false)))
        }
        return files.sorted { $0.path < $1.path }
    }

    /// The code of a line: string literals emptied, then the `//` comment dropped.
    static func code(_ line: Substring) -> String {
        var result = ""
        var inString = false
        var escaped = false
        var previous: Character?
        for character in line {
            if inString {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inString = false
                    result.append(character)
                }
            } else {
                if character == "/" && previous == "/" {
                    result.removeLast()
                    return result
                }
                if character == "\"" { inString = true }
                result.append(character)
            }
            previous = character
        }
        return result
    }

    /// The first group that matched of each match of `pattern` in `text`.
    static func matches(_ pattern: NSRegularExpression, _ text: String) -> [String] {
        let range = NSRange(text.startIndex..., in: text)
        return pattern.matches(in: text, range: range).compactMap { match in
            (1..<match.numberOfRanges).lazy.compactMap { Range(match.range(at: $0), in: text) }.first.map {
                String(text[$0])
            }
        }
    }

    /// The imported module of an import line, if the line is one.
    static func importedModule(_ line: String) -> String? {
        let range = NSRange(line.startIndex..., in: line)
        guard let match = importPattern.firstMatch(in: line, range: range),
            let module = Range(match.range(at: 7), in: line)
        else { return nil }
        return String(line[module])
    }

    /// The lines of `file` that break the boundary: a C module imported outside its folder; outside the boundary
    /// folders, any name of a C library (libcurl, libgpiod, libcrypto, the shims) or a system call or constant of
    /// the C library.
    static func boundaryViolations(in file: SourceFile) -> [String] {
        let insideBoundary = boundaryFolders.contains(file.folder)
        var found: [String] = []
        for (number, line) in file.lines.enumerated() {
            let code = code(line)
            var reasons: [String] = []
            if let module = importedModule(code), let allowed = allowedImports[module], !allowed.contains(file.folder) {
                reasons.append("imports \(module)")
            }
            if !insideBoundary {
                reasons += cLibraryPrefixes.filter { code.contains($0) }.map { "calls \($0)…" }
                reasons += matches(systemCallPattern, code).map { "calls \($0)" }
                reasons += matches(systemConstants, code).map { "uses \($0)" }
            }
            if !reasons.isEmpty {
                found.append(
                    "\(file.path):\(number + 1): \(reasons.joined(separator: ", ")): \(line.trimmingCharacters(in: .whitespaces))"
                )
            }
        }
        return found
    }

    /// What counts as an unsafe pointer use (or an unchecked promise the compiler cannot verify).
    static let unsafeMarkers = [
        "Unsafe", "Unmanaged", ".allocate(", ".deallocate(", "withMemoryRebound", "assumingMemoryBound",
        "bindMemory", "unsafeBitCast", "nonisolated(unsafe)", "curl_free(", "curl_slist_free_all(",
    ]

    /// The lines of `file` with an unsafe use whose line, or one of the three lines above, has no `SAFETY:`.
    static func unexplainedUnsafeUses(in file: SourceFile) -> [String] {
        var found: [String] = []
        for (number, line) in file.lines.enumerated() where unsafeMarkers.contains(where: code(line).contains) {
            let window = file.lines[max(0, number - 3)...number]
            if !window.contains(where: { $0.contains("SAFETY:") }) {
                found.append("\(file.path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        return found
    }

    @Test func noCLibraryIsCalledOutsideItsBoundaryFolder() throws {
        let files = try Self.agentSources()
        #expect(files.count > 40, "the agent's sources were not found at \(Self.sources)")
        let violations = files.flatMap(Self.boundaryViolations)
        #expect(violations.isEmpty, "C outside its boundary folder:\n\(violations.joined(separator: "\n"))")
    }

    @Test func everyUnsafePointerUseSaysWhyItIsSafe() throws {
        let files = try Self.agentSources()
        let unexplained = files.flatMap(Self.unexplainedUnsafeUses)
        #expect(
            unexplained.isEmpty, "unsafe pointer use without a SAFETY comment:\n\(unexplained.joined(separator: "\n"))")
    }

    /// The scans above would pass on sources they cannot read or patterns that match nothing: each boundary folder
    /// is there and holds its library's calls, and the scans find them there.
    @Test func theScansFindTheBoundaryWhereItIs() throws {
        let files = try Self.agentSources()
        let expected = [
            "Curl/": ("CCurl", "curl_easy_perform("), "Gpiod/": ("CGpiod", "cgpiod_read_event("),
            "Crypto/": ("CCrypto", "EVP_Digest("), "System/": ("Glibc", "fsync("),
            "Avahi/": ("CAvahi", "cavahi_start("), "NetworkManager/": ("CNetworkManager", "cnm_open("),
        ]
        for (folder, (module, call)) in expected {
            let inFolder = files.filter { $0.folder == folder }
            #expect(!inFolder.isEmpty, "no file in \(folder)")
            #expect(
                inFolder.contains { $0.lines.contains { Self.importedModule(Self.code($0)) == module } }, "\(folder)")
            #expect(inFolder.contains { $0.lines.contains { Self.code($0).contains(call) } }, "\(folder) \(call)")
        }
        // Read as if they were outside the boundary, System/'s files break it many times over.
        let system = files.filter { $0.folder == "System/" }.map { SourceFile("Orders/" + $0.path, $0.lines) }
        #expect(system.flatMap(Self.boundaryViolations).count > 30)
        // Unsafe uses are found (and explained) in several folders.
        let marked = files.filter { file in file.lines.contains { Self.unsafeMarkers.contains(where: $0.contains) } }
        #expect(Set(marked.map(\.folder)).isSuperset(of: ["Curl/", "Gpiod/", "System/", "Crypto/", "Avahi/"]))
    }

    @Test func theScansCatchEachKindOfBreach() {
        let bad: [Substring] = [
            "import Glibc", "@preconcurrency import CCurl", "internal import CGpiod", "import struct Darwin.stat",
            "let uid = geteuid()", "if errno == EINTR { retry() }", "curl_easy_init()", "cgpiod_get_value(h)",
            "let flags = O_RDONLY | O_CLOEXEC", "signal(SIGTERM, SIG_IGN)", "_ = Glibc.write(1, p, n)",
            "cavahi_stop(handle)", "import CAvahi",
        ]
        let found = Self.boundaryViolations(in: SourceFile("Orders/Bad.swift", bad))
        #expect(found.count == bad.count, "\(found.joined(separator: "\n"))")
        // Inside its own folder a module's import is fine, another library's is not.
        #expect(Self.boundaryViolations(in: SourceFile("System/A.swift", ["import Glibc", "fsync(fd)"])).isEmpty)
        #expect(Self.boundaryViolations(in: SourceFile("System/A.swift", ["import CCurl"])).count == 1)
        // Comments, string literals and the agent's own names are not breaches.
        let fine: [Substring] = [
            "// geteuid() is called by POSIX.effectiveUserID", "Output.error(\"chmod o-rwx, errno EINTR\")",
            "let owner = POSIX.effectiveUserID()", "error.systemError?.errno == Errno.noSuchFile",
            "let socket = Agent.controlSocketPath(stateDirectory: directory)",
            "SystemError(\"open\", path: p, errno: code)", "try read(type, from: path)", "import NIOPosix",
        ]
        #expect(Self.boundaryViolations(in: SourceFile("Orders/Fine.swift", fine)).isEmpty)

        let unsafe: [Substring] = [
            "let a = buffer.withUnsafeBytes { $0.count }", "// SAFETY: the buffer outlives the call.", "",
            "let b = buffer.withUnsafeBytes { $0.count }", "x", "y", "z", "let c = Unmanaged.passRetained(self)",
        ]
        #expect(
            Self.unexplainedUnsafeUses(in: SourceFile("Orders/U.swift", unsafe)) == [
                "Orders/U.swift:1: let a = buffer.withUnsafeBytes { $0.count }",
                "Orders/U.swift:8: let c = Unmanaged.passRetained(self)",
            ])
    }

    /// The typed face of the boundary: errno values by name, file facts in the agent's words.
    @Test func systemCallsAnswerInTypes() throws {
        let directory = temporaryDirectory()
        #expect(Errno.noSuchFile == ENOENT && Errno.symbolicLink == ELOOP && Errno.nameTooLong == ENAMETOOLONG)
        let info = try #require(try POSIX.status(directory))
        #expect(info.kind == .directory && info.owner == geteuid())
        let file = directory + "/f"
        try POSIX.writeFileAtomically(file, [1, 2, 3])
        #expect(try POSIX.linkStatus(file) == FileInfo(kind: .regular, owner: geteuid(), permissions: 0o600, size: 3))
        #expect(symlink(file, directory + "/link") == 0)
        #expect(try POSIX.linkStatus(directory + "/link")?.kind == .symbolicLink)
        do {
            _ = try POSIX.openFile(directory + "/link", .untrusted)
            Issue.record("a symbolic link was followed")
        } catch { #expect(error.systemError == SystemError("open", path: directory + "/link", errno: ELOOP)) }
        #expect(POSIX.effectiveUserID() == geteuid() && POSIX.processID() == getpid())
        #expect(FileKind(mode: S_IFSOCK).description == "socket")
        do {
            try UnixDatagram.send([1], to: .path(directory + "/nobody"))
            Issue.record("a datagram reached a socket that does not exist")
        } catch { #expect(error.operation == "sendto" && error.errno == ENOENT) }
        #expect(NetworkInterfaces.addresses().contains("127.0.0.1"))
    }

    /// ContinuousClock on Linux reads CLOCK_BOOTTIME (the Swift runtime's `swift_get_time`), not CLOCK_MONOTONIC,
    /// the clock of GPIO edge timestamps; which is why `InputPipeline` only ever carries an edge's age across.
    /// Here: a ContinuousClock reading lies between two CLOCK_BOOTTIME readings. (On a machine that has never
    /// been suspended the two kernel clocks agree, so this cannot tell them apart there.)
    @Test func continuousClockIsBootTime() {
        #expect(MemoryLayout<ContinuousClock.Instant>.size == MemoryLayout<Duration>.size)
        let before = POSIX.bootTimeNow()
        let continuous = unsafeBitCast(ContinuousClock.now, to: Duration.self)
        let after = POSIX.bootTimeNow()
        #expect(before <= continuous && continuous <= after, "\(before) \(continuous) \(after)")
        #expect(POSIX.monotonicNow() <= POSIX.bootTimeNow())
    }
}
