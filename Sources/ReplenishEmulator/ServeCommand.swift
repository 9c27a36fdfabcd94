import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

extension EmulatorConfig.OldRefreshTokenPolicy: ExpressibleByArgument {}

/// `replenish-emulator serve`: answers LWA, DRS and `/admin/` requests until SIGTERM or SIGINT.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Serve the emulated LWA and DRS endpoints.")

    @Option(help: "HOST:PORT to listen on; port 0 picks a free port.")
    var listen = ListenAddress(argument: "127.0.0.1:0")!

    @Option(help: "After binding, write the port number here (atomically).")
    var portFile: String?

    @Option(help: "Comma-separated slot ids that exist.")
    var slots = "slot-1,slot-2,slot-3"

    @Option(help: "Lifetime of an access token in seconds.")
    var accessTokenLifetime = 3600

    @Option(help: "Lifetime of an authorization code in seconds.")
    var codeLifetime = 300

    @Option(help: "Code-based linking: how long a code pair can be entered, in seconds.")
    var codePairLifetime = 600

    @Option(help: "Code-based linking: the least time between two polls of a code pair, in seconds.")
    var codePairInterval = 30

    @Option(help: "Code-based linking: the verification URI a code pair names.")
    var verificationUri = "https://amazon.com/us/code"

    @Flag(help: "Each refresh grant returns a new refresh token.")
    var rotateRefreshTokens = false

    @Flag(
        help:
            "LWA's consent as a page: GET /ap/oa answers a form; POST /ap/oa/consent (consent=ID&decision=allow or deny) redirects."
    )
    var consentPage = false

    @Option(help: "With rotation: invalidate the previous refresh token at once, or keep it until-used.")
    var oldRefreshTokenPolicy: EmulatorConfig.OldRefreshTokenPolicy = .untilUsed

    @Option(help: "Keep devices, tokens, orders and the replenish event log in this file (read at start).")
    var stateFile: String?

    @Flag(help: "Send expires_in as a JSON string.")
    var expiresInAsString = false

    @Flag(help: "Close each connection right after answering (without saying Connection: close).")
    var closeAfterAnswer = false

    @Flag(help: "Drop, unanswered and undone, every request that is not the first on its connection.")
    var dropReusedConnections = false

    @Option(help: "The app's client secret: a refresh grant that sends another one is refused with invalid_client.")
    var clientSecret: String?

    var slotList: [String] {
        slots.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    func validate() throws {
        let list = slotList
        guard !list.isEmpty, !list.contains(where: { $0.isEmpty || $0.contains("/") }) else {
            throw ValidationError("--slots needs non-empty slot ids without '/'")
        }
        guard Set(list).count == list.count else { throw ValidationError("--slots has a slot twice") }
        guard accessTokenLifetime > 0, codeLifetime > 0, codePairLifetime > 0 else {
            throw ValidationError("lifetimes must be positive")
        }
        guard codePairInterval >= 1 else { throw ValidationError("--code-pair-interval must be at least 1") }
        guard !verificationUri.isEmpty, !verificationUri.contains(where: { $0.isWhitespace }) else {
            throw ValidationError("--verification-uri must be a URI without spaces")
        }
    }

    func run() throws {
        var config = EmulatorConfig()
        config.slots = slotList
        config.accessTokenLifetime = Double(accessTokenLifetime)
        config.codeLifetime = Double(codeLifetime)
        config.codePairLifetime = Double(codePairLifetime)
        config.codePairInterval = Double(codePairInterval)
        config.verificationURI = verificationUri
        config.rotateRefreshTokens = rotateRefreshTokens
        config.consentPage = consentPage
        config.oldRefreshTokenPolicy = oldRefreshTokenPolicy
        config.expiresInAsString = expiresInAsString
        config.closeAfterAnswer = closeAfterAnswer
        config.dropReusedConnections = dropReusedConnections
        config.clientSecret = clientSecret

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = EmulatorServer(
            host: listen.host, port: listen.port,
            service: try EmulatorService(config: config, stateFile: stateFile))
        let channel = try server.bind(group: group)
        guard let port = channel.localAddress?.port else { throw ValidationError("could not read the bound port") }

        let sources = ProcessSignals.onTermination { _ in channel.close(promise: nil) }
        if let portFile { try Self.writeAtomically("\(port)\n", to: portFile) }
        // Written straight to the file descriptor: a test reading our stdout must see it now, not at exit.
        FileHandle.standardOutput.write(Data("emulator listening on http://\(listen.urlHost):\(port)\n".utf8))

        try? channel.closeFuture.wait()
        for source in sources { source.cancel() }
        try? group.syncShutdownGracefully()
    }

    /// Writes `text` to a temporary file beside `path`, then renames it over `path`.
    static func writeAtomically(_ text: String, to path: String) throws {
        let temporary = "\(path).tmp-\(getpid())"
        try Data(text.utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw ValidationError("cannot write \(path): \(reason)")
        }
    }
}
