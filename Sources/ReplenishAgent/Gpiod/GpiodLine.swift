import CGpiod

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One requested GPIO line (through the CGpiod shim, libgpiod v1 or v2), owned by this value and released when
/// it goes. Every failure carries the call's errno as a `SystemError` (path: the chip) inside an `AgentError`
/// with code `hardware`.
final class GpiodLine: @unchecked Sendable {
    // @unchecked: an input line is read only by the backend's event thread; an output line is written only
    // under the backend's lock.
    let name: String
    let chip: String
    let offset: Int
    private let handle: OpaquePointer

    private init(name: String, chip: String, offset: Int, handle: OpaquePointer) {
        self.name = name
        self.chip = chip
        self.offset = offset
        self.handle = handle
    }

    deinit { cgpiod_release(handle) }

    /// Requests `offset` on `chip` as an input reporting both edges, with the kernel's debounce where the
    /// libgpiod API has one (v2).
    static func input(_ input: BoardFile.Input, chip: String, offset: Int) throws(AgentError) -> GpiodLine {
        let handle = cgpiod_request_input(
            chip, UInt32(offset), input.activeLow ? 1 : 0, bias(input.bias), UInt(input.debounceMilliseconds) * 1000,
            consumer)
        guard let handle else { throw failure("request input \(input.name)", chip: chip, line: offset) }
        return GpiodLine(name: input.name, chip: chip, offset: offset, handle: handle)
    }

    /// Requests `offset` on `chip` as an output, driven inactive.
    static func output(_ output: BoardFile.Output, chip: String, offset: Int) throws(AgentError) -> GpiodLine {
        guard let handle = cgpiod_request_output(chip, UInt32(offset), output.activeLow ? 1 : 0, 0, consumer) else {
            throw failure("request output \(output.name)", chip: chip, line: offset)
        }
        return GpiodLine(name: output.name, chip: chip, offset: offset, handle: handle)
    }

    /// The logical level (true: active).
    func value() throws(AgentError) -> Bool {
        let value = cgpiod_get_value(handle)
        guard value >= 0 else { throw Self.failure("read input \(name)", chip: chip, line: offset) }
        return value == 1
    }

    /// Drives an output's logical level.
    func setValue(_ on: Bool) throws(AgentError) {
        if cgpiod_set_value(handle, on ? 1 : 0) != 0 {
            throw Self.failure("set output \(name)", chip: chip, line: offset)
        }
    }

    /// The descriptor that becomes readable when an edge event is pending (inputs only).
    var eventDescriptor: Int32 { cgpiod_event_fd(handle) }

    /// One edge event read from the kernel.
    struct Event {
        /// A rising (logically active) edge.
        var rising: Bool
        /// When the kernel saw it, on CLOCK_MONOTONIC (libgpiod v2 and the v1 ABI since Linux 5.7; older kernels
        /// stamp v1 events with CLOCK_REALTIME, which `InputPipeline` recognises as a time in the future).
        var timestamp: Duration
    }

    /// Reads one pending edge event; nil when none was pending after all (EAGAIN, EINTR).
    func readEvent() throws(AgentError) -> Event? {
        var rising: Int32 = 0
        var nanoseconds: UInt64 = 0
        if cgpiod_read_event(handle, &rising, &nanoseconds) == 0 {
            return Event(rising: rising != 0, timestamp: .nanoseconds(Int64(clamping: nanoseconds)))
        }
        if errno == EAGAIN || errno == EINTR { return nil }
        throw Self.failure("read event on input \(name)", chip: chip, line: offset)
    }

    /// libgpiod's version and API, for `gpio-watch`'s ready line.
    static var apiDescription: String {
        "libgpiod \(String(cString: cgpiod_library_version())) (API v\(cgpiod_api_major()))"
    }

    private static let consumer = "replenish-agent"

    private static func bias(_ bias: BoardFile.Bias) -> Int32 {
        switch bias {
        case .asIs: Int32(CGPIOD_BIAS_AS_IS.rawValue)
        case .disabled: Int32(CGPIOD_BIAS_DISABLED.rawValue)
        case .pullUp: Int32(CGPIOD_BIAS_PULL_UP.rawValue)
        case .pullDown: Int32(CGPIOD_BIAS_PULL_DOWN.rawValue)
        }
    }

    /// The failed call (errno as it is now) as a `hardware` error, "request input button (chip gpiochip0, line
    /// 17): Device or resource busy", whose cause is the `SystemError` (operation, chip, errno).
    private static func failure(_ operation: String, chip: String, line: Int) -> AgentError {
        let cause = SystemError(operation, path: chip, errno: errno)
        return AgentError(
            .hardware, "\(operation) (chip \(chip), line \(line)): \(POSIX.describe(cause.errno))", cause: cause)
    }
}
