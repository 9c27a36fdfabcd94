import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real hardware backend: libgpiod (v1 or v2 API, chosen at build time in CGpiod) through `GpiodLine`.
/// Input lines report both edges, each with the kernel's timestamp; one dedicated thread blocks in poll(2) on
/// their event file descriptors and a wake pipe, so an idle device makes no wakeups for GPIO, and the Swift
/// concurrency pool is never blocked.
final class GpiodBackend: GPIOBackend, @unchecked Sendable {
    // @unchecked: `inputs` is immutable after init and read by the event thread only; `outputs` is guarded
    // by `outputLock`; the pipe descriptors are immutable.
    let edges: AsyncStream<InputEdge>
    private let continuation: AsyncStream<InputEdge>.Continuation
    private let inputs: [GpiodLine]
    private let outputs: [String: GpiodLine]
    private let outputLock = Mutex(())
    private let wakePipe: (read: Int32, write: Int32)
    private var thread: pthread_t?
    private let stopped = Mutex<AgentError?>(nil)
    /// poll(2)'s timeout in milliseconds: -1 (none) unless a watchdog wants heartbeats.
    private let pollTimeout: Int32
    private let beatCount = Atomic<UInt64>(0)

    /// `heartbeat`: with systemd's watchdog on, the GPIO thread wakes at least this often and counts a beat
    /// (`beats`), so the watchdog can tell a live thread from a stuck one. Nil (no watchdog): no timeout, no
    /// idle wakeups.
    init(board: BoardFile, heartbeat: Duration? = nil) throws(AgentError) {
        guard let chip = board.chip else { throw AgentError(.configuration, "a gpiod board needs a chip") }
        (edges, continuation) = AsyncStream.makeStream(of: InputEdge.self, bufferingPolicy: .bufferingNewest(1024))
        var lines: [GpiodLine] = []
        for input in board.inputs {
            guard let offset = input.line else { throw AgentError(.configuration, "input \(input.name) has no line") }
            let line = try GpiodLine.input(input, chip: chip, offset: offset)
            lines.append(line)
            // A level sensor that is already active (running out) at start has no edge to report it: its
            // level is read once and reported as the first edge, so a device installed next to an almost
            // empty supply still orders (after the sensor's minimum active time, as for any edge).
            if input.kind == .level, try line.value() {
                continuation.yield(InputEdge(input: input.name, active: true))
            }
        }
        var outputLines: [String: GpiodLine] = [:]
        for output in board.outputs {
            guard let offset = output.line else {
                throw AgentError(.configuration, "output \(output.name) has no line")
            }
            outputLines[output.name] = try GpiodLine.output(output, chip: chip, offset: offset)
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0, fcntl(fds[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0 else {
            throw AgentError.system(.hardware, "pipe", "for the GPIO thread", errno: errno)
        }
        inputs = lines
        outputs = outputLines
        pollTimeout = heartbeat.map(Self.milliseconds) ?? -1
        wakePipe = (fds[0], fds[1])
        try startThread()
    }

    deinit {
        close(wakePipe.read)
        close(wakePipe.write)
    }

    static var apiDescription: String { GpiodLine.apiDescription }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }

    func setOutput(_ name: String, on: Bool) throws(AgentError) {
        guard let line = outputs[name] else { throw AgentError(.hardware, "the board has no output named \"\(name)\"") }
        try outputLock.withLock { _ throws(AgentError) in try line.setValue(on) }
    }

    var failure: AgentError? { stopped.withLock { $0 } }

    /// How many times the GPIO thread came back from poll(2): moves at least once per heartbeat while it runs.
    var beats: UInt64 { beatCount.load(ordering: .relaxed) }

    func shutdown() {
        var byte: UInt8 = 1
        _ = write(wakePipe.write, &byte, 1)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        continuation.finish()
    }

    private func startThread() throws(AgentError) {
        // SAFETY: the backend is retained once here for the thread; the thread (or the failure path below, when
        // no thread was made) takes that one reference back exactly once, so it is neither leaked nor freed early.
        let context = Unmanaged.passRetained(self).toOpaque()
        var created = pthread_t()
        let result = pthread_create(
            &created, nil,
            { raw in
                // SAFETY: `raw` is the `context` retained above and is taken back only here, once.
                let backend = Unmanaged<GpiodBackend>.fromOpaque(raw!).takeRetainedValue()
                backend.eventLoop()
                return nil
            }, context)
        guard result == 0 else {
            // SAFETY: no thread was created, so the reference retained for it is released here, once.
            Unmanaged<GpiodBackend>.fromOpaque(context).release()
            throw AgentError.system(.hardware, "pthread_create", "for the GPIO thread", errno: result)
        }
        thread = created
    }

    /// Blocks in poll(2) until an edge or the wake pipe; without a heartbeat it never times out, never polls on
    /// a timer; with one, a timeout only counts a beat. A line whose descriptor reports an error (a GPIO
    /// expander unplugged, a chip gone) ends the stream with `failure` set rather than spinning: the daemon
    /// then stops with the reason and systemd starts it again.
    private func eventLoop() {
        var descriptors = inputs.map { pollfd(fd: $0.eventDescriptor, events: Int16(POLLIN), revents: 0) }
        descriptors.append(pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0))
        let broken = Int16(POLLERR | POLLHUP | POLLNVAL)
        while true {
            let ready = POSIX.retryingEINTR { poll(&descriptors, nfds_t(descriptors.count), pollTimeout) }
            beatCount.add(1, ordering: .relaxed)
            if ready == 0 { continue }
            if ready < 0 { return stop(AgentError.system(.hardware, "poll", "on the GPIO lines", errno: errno)) }
            if descriptors.last!.revents != 0 { return }
            for index in inputs.indices where descriptors[index].revents != 0 {
                let line = inputs[index]
                if descriptors[index].revents & broken != 0 {
                    return stop(
                        AgentError(
                            .hardware,
                            "input \(line.name): the line's event descriptor reported an error (revents \(descriptors[index].revents))"
                        ))
                }
                do throws(AgentError) {
                    if let event = try line.readEvent() {
                        continuation.yield(
                            InputEdge(input: line.name, active: event.rising, timestamp: event.timestamp))
                    }
                } catch {
                    return stop(error)
                }
            }
        }
    }

    private func stop(_ error: AgentError) {
        stopped.withLock { $0 = error }
        continuation.finish()
    }
}
