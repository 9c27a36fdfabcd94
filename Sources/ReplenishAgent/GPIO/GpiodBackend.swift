import CGpiod
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One requested GPIO line, released when this value goes.
final class GpiodLine: @unchecked Sendable {
    // @unchecked: an input line is read only by the backend's event thread; an output line is written only
    // under the backend's lock.
    let name: String
    fileprivate let handle: OpaquePointer

    fileprivate init(name: String, handle: OpaquePointer) {
        self.name = name
        self.handle = handle
    }

    deinit { cgpiod_release(handle) }
}

/// The real hardware backend: libgpiod (v1 or v2 API, chosen at build time in CGpiod). Input lines report
/// both edges; one dedicated thread blocks in poll(2) on their event file descriptors and a wake pipe, so an
/// idle device makes no wakeups for GPIO, and the Swift concurrency pool is never blocked.
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
            let handle = cgpiod_request_input(
                chip, UInt32(offset), input.activeLow ? 1 : 0, Self.bias(input.bias),
                UInt(input.debounceMilliseconds) * 1000, "replenish-agent")
            guard let handle else { throw Self.error("request input", chip: chip, line: offset, name: input.name) }
            lines.append(GpiodLine(name: input.name, handle: handle))
            // A level sensor that is already active (running out) at start has no edge to report it: its
            // level is read once and reported as the first edge, so a device installed next to an almost
            // empty supply still orders (after the sensor's minimum active time, as for any edge).
            if input.kind == .level {
                let value = cgpiod_get_value(handle)
                guard value >= 0 else { throw Self.error("read input", chip: chip, line: offset, name: input.name) }
                if value == 1 { continuation.yield(InputEdge(input: input.name, active: true)) }
            }
        }
        var outputLines: [String: GpiodLine] = [:]
        for output in board.outputs {
            guard let offset = output.line else {
                throw AgentError(.configuration, "output \(output.name) has no line")
            }
            guard
                let handle = cgpiod_request_output(chip, UInt32(offset), output.activeLow ? 1 : 0, 0, "replenish-agent")
            else { throw Self.error("request output", chip: chip, line: offset, name: output.name) }
            outputLines[output.name] = GpiodLine(name: output.name, handle: handle)
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0, fcntl(fds[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0 else {
            throw AgentError(.hardware, "pipe for the GPIO thread: \(POSIX.describe(errno))")
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

    static var apiDescription: String {
        "libgpiod \(String(cString: cgpiod_library_version())) (API v\(cgpiod_api_major()))"
    }

    private static func bias(_ bias: BoardFile.Bias) -> Int32 {
        switch bias {
        case .asIs: Int32(CGPIOD_BIAS_AS_IS.rawValue)
        case .disabled: Int32(CGPIOD_BIAS_DISABLED.rawValue)
        case .pullUp: Int32(CGPIOD_BIAS_PULL_UP.rawValue)
        case .pullDown: Int32(CGPIOD_BIAS_PULL_DOWN.rawValue)
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }

    private static func error(_ operation: String, chip: String, line: Int, name: String) -> AgentError {
        AgentError(.hardware, "\(operation) \(name) (chip \(chip), line \(line)): \(POSIX.describe(errno))")
    }

    func setOutput(_ name: String, on: Bool) throws(AgentError) {
        guard let line = outputs[name] else { throw AgentError(.hardware, "the board has no output named \"\(name)\"") }
        let result = outputLock.withLock { _ in cgpiod_set_value(line.handle, on ? 1 : 0) }
        if result != 0 { throw AgentError(.hardware, "set output \(name): \(POSIX.describe(errno))") }
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
        let context = Unmanaged.passRetained(self).toOpaque()
        var created = pthread_t()
        let result = pthread_create(
            &created, nil,
            { raw in
                // Safe: `raw` is the retained backend passed below; the thread releases it when it ends.
                let backend = Unmanaged<GpiodBackend>.fromOpaque(raw!).takeRetainedValue()
                backend.eventLoop()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<GpiodBackend>.fromOpaque(context).release()
            throw AgentError(.hardware, "cannot start the GPIO thread: \(POSIX.describe(result))")
        }
        thread = created
    }

    /// Blocks in poll(2) until an edge or the wake pipe; without a heartbeat it never times out, never polls on
    /// a timer; with one, a timeout only counts a beat. A line whose descriptor reports an error (a GPIO
    /// expander unplugged, a chip gone) ends the stream with `failure` set rather than spinning: the daemon
    /// then stops with the reason and systemd starts it again.
    private func eventLoop() {
        var descriptors = inputs.map { pollfd(fd: cgpiod_event_fd($0.handle), events: Int16(POLLIN), revents: 0) }
        descriptors.append(pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0))
        let broken = Int16(POLLERR | POLLHUP | POLLNVAL)
        while true {
            let ready = POSIX.retryingEINTR { poll(&descriptors, nfds_t(descriptors.count), pollTimeout) }
            beatCount.add(1, ordering: .relaxed)
            if ready == 0 { continue }
            if ready < 0 { return stop("poll on the GPIO lines: \(POSIX.describe(errno))") }
            if descriptors.last!.revents != 0 { return }
            for index in inputs.indices where descriptors[index].revents != 0 {
                let name = inputs[index].name
                if descriptors[index].revents & broken != 0 {
                    return stop(
                        "input \(name): the line's event descriptor reported an error (revents \(descriptors[index].revents))"
                    )
                }
                var rising: Int32 = 0
                var timestamp: UInt64 = 0
                if cgpiod_read_event(inputs[index].handle, &rising, &timestamp) == 0 {
                    continuation.yield(InputEdge(input: name, active: rising != 0))
                } else if errno != EAGAIN && errno != EINTR {
                    return stop("read event on input \(name): \(POSIX.describe(errno))")
                }
            }
        }
    }

    private func stop(_ reason: String) {
        stopped.withLock { $0 = AgentError(.hardware, reason) }
        continuation.finish()
    }
}
