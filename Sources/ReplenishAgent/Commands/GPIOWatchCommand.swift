import ArgumentParser
import Logging

/// `gpio-watch`: board bring-up and hardware tests. Requests the board's lines exactly as `run` does, drives
/// every output to the given level, and prints each raw edge and each debounced press until the time is up
/// (or SIGINT/SIGTERM). Nothing is ordered.
struct GPIOWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gpio-watch",
        abstract: "Print the board's input edges and recognised presses; drive its outputs (bring-up, tests).")

    @Option(name: .long, help: "A board file to watch (instead of the board of --config).")
    var board: String?

    @OptionGroup var options: ConfigOption

    @Option(name: .long, help: "How long to watch, in seconds.")
    var seconds: Double = 30

    /// The level every output is driven to while watching.
    enum OutputLevel: String, CaseIterable, ExpressibleByArgument, Sendable {
        case on, off
    }

    @Option(name: .long, help: "Level to drive every output to while watching: on or off.")
    var outputs: OutputLevel = .on

    func validate() throws {
        guard seconds > 0, seconds <= 86400 else { throw ValidationError("--seconds must be from 0 to 86400") }
    }

    func run() async throws {
        POSIX.unblockAllSignals()
        let boardFile = try loadBoard()
        let backend: any GPIOBackend
        do {
            switch boardFile.backend {
            case .simulated: backend = SimulatedBackend(board: boardFile)
            case .gpiod: backend = try GpiodBackend(board: boardFile)
            }
            for output in boardFile.outputs { try backend.setOutput(output.name, on: outputs == .on) }
        } catch {
            Output.error("gpio-watch: \(error.message)")
            throw ExitCode(1)
        }
        let clock = ContinuousClock()
        let started = clock.now
        /// The time since the start, less `ago`: an edge is stamped with when the kernel saw it, as the
        /// pipeline's debouncer times it, not with when it was printed.
        @Sendable func stamp(ago: Duration = .zero) -> String {
            let elapsed = started.duration(to: clock.now) - ago
            let milliseconds =
                elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
            return "t=\(milliseconds)ms"
        }
        let pipeline = InputPipeline(board: boardFile, clock: clock, logger: Logger(label: "gpio-watch")) {
            Output.line("press \($0.input) \($0.kind.rawValue) \(stamp())")
            return .success("printed")
        }
        let api = boardFile.backend == .gpiod ? GpiodBackend.apiDescription : "simulated"
        Output.line(
            "ready board=\"\(boardFile.name)\" inputs=\(boardFile.inputs.count) outputs=\(outputs.rawValue) \(api)")
        let printed = AsyncStream<InputEdge> { continuation in
            Task {
                for await edge in backend.edges {
                    let ago = edge.age(monotonicNow: POSIX.monotonicNow())
                    Output.line("edge \(edge.input) \(edge.active ? "active" : "inactive") \(stamp(ago: ago))")
                    continuation.yield(edge)
                }
                continuation.finish()
            }
        }
        let watcher = Task { await pipeline.run(edges: printed) }
        let signals = SignalWaiter(signals: [.interrupt, .terminate])
        await signals.wait(orFor: .milliseconds(Int64(seconds * 1000)), clock: clock)
        let failure = backend.failure
        backend.shutdown()
        await watcher.value
        if let failure {
            Output.error("gpio-watch: \(failure.message)")
            throw ExitCode(1)
        }
        Output.line("done \(stamp())")
    }

    private func loadBoard() throws -> BoardFile {
        let path = try board ?? options.load().boardPath
        var problems = Problems()
        guard let bytes = try? POSIX.readFile(path), let json = try? JSONValue.parse(bytes),
            let parsed = BoardFile.parse(json, file: path, problems: &problems)
        else {
            for line in problems.lines.isEmpty ? ["\(path): cannot read the board file"] : problems.lines {
                Output.error(line)
            }
            throw ExitCode(1)
        }
        return parsed
    }
}
