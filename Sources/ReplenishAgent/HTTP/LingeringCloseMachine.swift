import NIOCore

/// The lingering close of one connection as a value (the shape of `CodeLinking`): events go in with the event
/// loop's instant, actions come out; it reads no clock and touches no channel. `LingeringClose` feeds it and
/// carries its actions out.
///
/// The rules: once armed (an answer that ends the connection is out or going), input is discarded instead of
/// parsed, and a close of the whole connection becomes a lingering one: flush the answer, shut down the
/// sending side, keep reading and discarding until the peer closes, `time` has passed since the close, `idle`
/// has passed without a byte, or more than `bytes` were discarded; then close. A peer that half-closed has
/// nothing left to send: a close (armed or not) then flushes the answer and closes, and a lingering close ends
/// as soon as its answer is out. `closeNow` closes at once (the request deadline, an eviction).
struct LingeringCloseMachine: Sendable {
    enum Event: Sendable, Equatable {
        /// An answer that ends the connection is out or going (`LingeringClose.Arm`).
        case armed
        /// `count` bytes came in at `at`.
        case read(count: Int, at: NIODeadline)
        /// The end of a batch of reads.
        case readComplete
        /// The peer half-closed (`ChannelEvent.inputClosed`): no more input will come.
        case inputClosed
        /// Something above closes the connection (`mode`) at `at`.
        case closeRequested(CloseMode, at: NIODeadline)
        /// The flush that a lingering close began with completed: the answer is out.
        case answerFlushed
        /// The timer of the last `.linger` or `.arm` went off.
        case timerFired(at: NIODeadline)
        /// `LingeringClose.CloseNow`.
        case closeNow
    }

    enum Action: Sendable, Equatable {
        /// Pass the event on, as if there were no lingering close.
        case forward
        /// Nothing (the event stops here: discarded input, a close already lingering).
        case none
        /// Ask for more input (to discard it).
        case read
        /// Take over the close: set the timer to `until`, flush the answer (then `.answerFlushed`), and ask for
        /// more input if `read`.
        case linger(until: NIODeadline, read: Bool)
        /// Set the timer again, to `until`.
        case arm(until: NIODeadline)
        /// Shut down the sending side (the answer is out; the peer may still send).
        case shutdownOutput
        /// Close the whole connection now, with the promise of the close taken over, and stop the timer.
        case close
    }

    /// How long, and how much, a lingering close reads and discards (`LocalHTTPServer.Limits`' `lingerTime`,
    /// `lingerIdle`, `lingerBytes`).
    let time: TimeAmount
    let idle: TimeAmount
    let bytes: Int

    private(set) var armed = false
    /// The peer half-closed.
    private var inputClosed = false
    /// Since when the close lingers (nil: it does not).
    private var lingerStarted: NIODeadline?
    private var lastRead = NIODeadline.uptimeNanoseconds(0)
    /// The lingering close flushed the answer.
    private var answerOut = false
    private var discarded = 0

    init(time: TimeAmount, idle: TimeAmount, bytes: Int) {
        self.time = time
        self.idle = idle
        self.bytes = bytes
    }

    mutating func handle(_ event: Event) -> Action {
        switch event {
        case .armed:
            armed = true
            return .none
        case .read(let count, let now):
            guard armed else { return .forward }
            discarded += count
            lastRead = now
            return discarded > bytes ? .close : .none
        case .readComplete:
            guard armed else { return .forward }
            // Keep reading while lingering: nothing above asks for more once the request is answered.
            return lingerStarted == nil ? .none : .read
        case .inputClosed:
            inputClosed = true
            if lingerStarted != nil {
                // What the lingering close waited for: the peer is done sending (once the answer is out; if it
                // is not yet, the flush's completion closes).
                return answerOut ? .close : .none
            }
            // Once armed, the answer that ends the connection is out or going: the parser above must not see
            // the end of an unfinished request and answer it a second time.
            return armed ? .none : .forward
        case .closeRequested(let mode, let now):
            guard armed || inputClosed, mode == .all else { return .forward }
            guard lingerStarted == nil else { return .none }
            lingerStarted = now
            lastRead = now
            return .linger(until: end(from: now), read: !inputClosed)
        case .answerFlushed:
            answerOut = true
            // A peer that half-closed sends nothing more: nothing to read and discard.
            return inputClosed ? .close : .shutdownOutput
        case .timerFired(let now):
            guard let started = lingerStarted else { return .none }
            let end = end(from: started)
            return now >= end ? .close : .arm(until: end)
        case .closeNow:
            return .close
        }
    }

    /// The end of the lingering time or of the idle time, whichever comes first.
    private func end(from started: NIODeadline) -> NIODeadline { min(started + time, lastRead + idle) }
}
