/// The configured way into a pairing, for what the long press and a reset do about it: the companion app's
/// pairing window (`pairing.mode` `companion`), or code-based linking (`code`).
enum PairingByMode<C: Clock>: Sendable where C.Duration == Duration {
    case window(PairingWindowKeeper<C>, minutes: Int)
    case code(CodeLinker<C>)

    /// The long press: opens the pairing window, or asks LWA for a code at once. Returns the press's answer.
    func open() async -> String {
        switch self {
        case .window(let window, let minutes):
            await window.handle(.longPress)
            return "pairing window open for \(minutes) minutes: pair the device with the companion app"
        case .code(let linking):
            await linking.handle(.retryNow)
            return "code-based linking: enter the code that replenish-agent status shows"
        }
    }

    /// How the device pairs again after a reset, for the reset's answer.
    var afterReset: String {
        switch self {
        case .window: "pairing window open"
        case .code: "code-based linking starts again"
        }
    }

    /// After a reset wiped `status.json` (or forgot the account in it): what the status file shows of the way
    /// in goes back into it, the window's closing time or the code being shown. The window's opening (a reset
    /// loses the pairing) may have been recorded before the wipe.
    func afterWipe() async {
        switch self {
        case .window(let window, _): await window.republish()
        case .code(let linking): await linking.republish()
        }
    }

    /// The start: a device that is not paired opens its window, or starts asking for a code.
    func start(paired: Bool) async {
        switch self {
        case .window(let window, _): await window.handle(.started(paired: paired))
        case .code(let linking): await linking.handle(.started(paired: paired))
        }
    }
}
