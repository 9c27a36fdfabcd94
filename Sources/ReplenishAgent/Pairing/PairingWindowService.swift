import Logging

/// Opens the pairing port while the `PairingWindow` is open and closes it when the window closes (time up,
/// or paired). Thin: every decision is the window's; this only applies events at the clock's time, publishes
/// its state (LED, status), and starts and stops the server.
actor PairingWindowService<C: Clock> where C.Duration == Duration {
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
    private func check() async -> C.Instant? {
        let now = clock.now
        let wasOpen = window.isOpen(at: now) || window.closesAt != nil
        window.expire(at: now)
        if wasOpen && window.closesAt == nil && !window.paired {
            logger.notice("pairing window closed: time is up; a long press on the button opens it again")
        }
        publish()
        return window.closesAt
    }

    private func publish() {
        let current = state
        guard current != published else { return }
        published = current
        changes.publish(current)
    }

    /// Serves (`serve`, until cancelled) while the window is open. `serve` rings its `answered` waker once
    /// the pairing answer (204) is out, so the port closes only after the app has it.
    func run(serve: @escaping @Sendable (_ answered: Waker) async throws -> Void) async throws {
        while !Task.isCancelled {
            guard var closesAt = await check() else {
                await waker.wait(timeout: nil, clock: clock)
                continue
            }
            let answered = Waker()
            let server = Task { try await serve(answered) }
            await withTaskCancellationHandler {
                while !Task.isCancelled {
                    await waker.wait(until: closesAt, clock: clock)
                    guard let next = await check() else { break }
                    closesAt = next
                }
                if !Task.isCancelled && window.paired {
                    await answered.wait(timeout: .seconds(5), clock: clock)
                }
            } onCancel: {
                server.cancel()
            }
            server.cancel()
            do { try await server.value } catch is CancellationError {} catch {
                logger.error("pairing server failed", metadata: ["error": "\(error)"])
                if !Task.isCancelled { try await clock.loopSleep(for: .seconds(5)) }
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

extension PairingWindowService {
    /// A pairing closes the window; a lost pairing opens it.
    nonisolated func follow(tokens: AsyncStream<TokenEvent>) async {
        await tokens.forEachPairingChange { paired in await handle(paired ? .paired : .pairingLost) }
    }
}
