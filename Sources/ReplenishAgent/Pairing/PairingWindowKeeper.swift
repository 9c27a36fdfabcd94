import Logging
import Synchronization

/// Opens the pairing port while the `PairingWindow` is open and closes it when the window closes (time up,
/// or paired). Thin: every decision is the window's; this only applies events at the clock's time, publishes
/// its state (LED, status), and starts and stops the server.
final actor PairingWindowKeeper<C: Clock> where C.Duration == Duration {
    /// What observers see: open or not, and when it closes (wall-clock seconds since 1970).
    struct State: Sendable, Equatable {
        var open: Bool
        var closesAt: Double?
    }

    private var window: PairingWindow<C.Instant>
    private let clock: C
    private let wallTime: @Sendable () -> Double
    private let logger: Logger
    private let waker = Waker()
    /// The window's state at every change (and once at the first event); published, never awaited.
    nonisolated let changes = Broadcast<State>()
    private var published: State?

    init(length: Duration, clock: C, wallTime: @escaping @Sendable () -> Double, logger: Logger) {
        window = PairingWindow(length: length)
        self.clock = clock
        self.wallTime = wallTime
        self.logger = logger
    }

    var state: State {
        let now = clock.now
        guard let closesAt = window.closesAt, window.isOpen(at: now) else { return State(open: false, closesAt: nil) }
        return State(open: true, closesAt: wallTime() + Self.seconds(now.duration(to: closesAt)))
    }

    var isOpen: Bool { window.isOpen(at: clock.now) }

    func handle(_ event: PairingWindow<C.Instant>.Event) async {
        let wasOpen = window.isOpen(at: clock.now)
        let open = window.handle(event, at: clock.now)
        if open {
            logger.notice(
                "pairing window open",
                metadata: [
                    "pairing.window.event": "\(event)", "pairing.window.seconds": "\(Self.seconds(window.length))",
                ])
        } else if wasOpen {
            logger.notice("pairing window closed", metadata: ["pairing.window.event": "\(event)"])
        }
        waker.ring()
        publish()
    }

    /// Closes the window if its time is up; returns when it closes (nil: closed).
    private func check() -> C.Instant? {
        let now = clock.now
        let wasOpen = window.isOpen(at: now) || window.closesAt != nil
        window.expire(at: now)
        if wasOpen && window.closesAt == nil && !window.paired {
            logger.notice("pairing window closed: time is up; a long press on the button opens it again")
        }
        publish()
        return window.closesAt
    }

    /// Publishes the state again, changed or not: a reset wiped the status file, and the window's opening may
    /// have been written to it before the wipe.
    func republish() {
        published = nil
        publish()
    }

    private func publish() {
        let current = state
        guard current != published else { return }
        published = current
        changes.publish(current)
    }

    /// What serves the endpoints while the window is open, until cancelled; it rings `answered` once the
    /// pairing answer (204) is out, so the port closes only after the app has it.
    typealias Serve = @Sendable (_ answered: PairingAnswered) async throws -> Void

    private var server: (task: Task<Void, any Error>, answered: PairingAnswered)?
    /// When the port is served: the window, the app's answer, a failed server's restart.
    private var port = PairingPortTiming<C.Instant>()

    /// Serves (`serve`) while the window is open, until cancelled.
    func run(serve: @escaping Serve) async {
        while !Task.isCancelled { await waker.wait(for: await step(serve: serve), clock: clock) }
        if let server { await stop(server) }
    }

    /// Carries out `PairingPortTiming`'s actions (start the server, stop it) until it says wait; returns the wait.
    func step(serve: @escaping Serve) async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            let facts = PairingPortTiming<C.Instant>.Facts(
                closesAt: check(), paired: window.paired, serving: server != nil,
                answered: server?.answered.isAnswered ?? false)
            switch port.next(facts, at: clock.now) {
            case .wait(let until):
                return .wait(until: until, worked: worked)
            case .startServer:
                let answered = PairingAnswered(waker: waker)
                server = (Task { try await serve(answered) }, answered)
            case .stopServer:
                if let server { await stop(server) }
            }
            worked = true
        }
        return .wait(until: nil, worked: worked)
    }

    private func stop(_ running: (task: Task<Void, any Error>, answered: PairingAnswered)) async {
        running.task.cancel()
        let result = await running.task.result
        server = nil
        var failed = false
        if case .failure(let error) = result, !(error is CancellationError) {
            logger.error("pairing server failed", metadata: ["error": "\(error)"])
            failed = true
        }
        port.stopped(failed: failed && !Task.isCancelled, at: clock.now)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

extension PairingWindowKeeper {
    /// A pairing closes the window; a lost pairing opens it.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        await tokens.forEachPairingChange { paired in await handle(paired ? .paired : .pairingLost) }
    }
}

/// Rung by the pairing endpoints once the pairing answer (204) is out: the window's service may close the port.
final class PairingAnswered: Sendable {
    private let answered = Mutex(false)
    private let waker: Waker

    init(waker: Waker) { self.waker = waker }

    var isAnswered: Bool { answered.withLock { $0 } }

    func ring() {
        answered.withLock { $0 = true }
        waker.ring()
    }
}
