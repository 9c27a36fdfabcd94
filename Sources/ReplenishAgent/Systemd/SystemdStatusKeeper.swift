/// The `STATUS=` line `systemctl status replenish-agent` shows: pairing and token state, and the outbox.
/// Never a token or any other secret (the token state's reason is the one `status` prints too).
enum SystemdStatusLine {
    /// `waitingFor`: how the device is paired again (the companion app, or a code entered at LWA's page).
    static func text(
        token: TokenState, pending: Int, parked: Int, waitingFor: String = "the companion app"
    ) -> String {
        var orders = "\(pending) order\(pending == 1 ? "" : "s") pending"
        if parked > 0 { orders += ", \(parked) parked" }
        switch token {
        case .unpaired:
            return "pairing mode: waiting for \(waitingFor); \(orders)"
        case .needsPairing(let reason):
            return "pairing mode: the pairing was revoked (\(reason)), waiting for \(waitingFor); \(orders)"
        case .fresh(let expiresAt):
            return "paired; token fresh, expires \(ISO8601.format(expiresAt)); \(orders)"
        case .refreshing:
            return "paired; token refreshing; \(orders)"
        case .retryWait(_, let reason):
            return "paired; token refresh failing, retrying (\(reason)); \(orders)"
        }
    }
}

/// What keeps a program's `STATUS=` line (`SystemdStatusKeeper` for drs, `ReportStatusKeeper` for alexa): the
/// line goes out with `READY=1`, changes while running, and ends with `STOPPING=1`.
protocol StatusLineKeeper: Actor {
    /// `READY=1` with the current line; the failure, if the notification could not be sent.
    func ready() -> String?
    /// `STOPPING=1`; no more lines are sent after it.
    func stopping() -> String?
}

/// Keeps the latest facts for the `STATUS=` line and sends the line to systemd whenever its text changes.
final actor SystemdStatusKeeper<C: Clock>: StatusLineKeeper where C.Duration == Duration {
    private let notifier: SystemdNotifier
    private var token: TokenState
    private var pending: Int
    private var parked: Int
    private let waitingFor: String
    /// Lines go out only between READY and STOPPING.
    private enum Phase {
        case starting
        case running(sent: String)
        case stopping
    }
    private var phase = Phase.starting

    init(
        notifier: SystemdNotifier, token: TokenState, pending: Int, parked: Int,
        waitingFor: String = "the companion app"
    ) {
        self.waitingFor = waitingFor
        self.notifier = notifier
        self.token = token
        self.pending = pending
        self.parked = parked
    }

    var text: String {
        SystemdStatusLine.text(token: token, pending: pending, parked: parked, waitingFor: waitingFor)
    }

    func update(token: TokenState) {
        self.token = token
        publish()
    }

    func update(pending: Int, parked: Int) {
        self.pending = pending
        self.parked = parked
        publish()
    }

    /// `READY=1` with the current line.
    func ready() -> String? {
        phase = .running(sent: text)
        return notifier.ready(status: text)
    }

    /// `STOPPING=1`; no more lines are sent after it.
    func stopping() -> String? {
        phase = .stopping
        return notifier.stopping(status: "stopping")
    }

    private func publish() {
        guard case .running(let sent) = phase, text != sent else { return }
        phase = .running(sent: text)
        notifier.status(text)
    }
}
