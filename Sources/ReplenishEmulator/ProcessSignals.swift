import Dispatch
import Foundation

/// Signal set-up for the emulator's process.
enum ProcessSignals {
    /// Unblocks every signal: a process started from a test thread can inherit a blocked mask, and would then
    /// never see SIGTERM.
    static func unblockAll() {
        var set = sigset_t()
        sigemptyset(&set)
        sigprocmask(SIG_SETMASK, &set, nil)
    }

    /// Calls `handler` once on a background queue at the first SIGTERM or SIGINT. The returned sources must be
    /// kept alive.
    static func onTermination(_ handler: @escaping @Sendable (Int32) -> Void) -> [any DispatchSourceSignal] {
        // A write to a closed pipe (an `openssl` that died) must be an error, not death.
        signal(SIGPIPE, SIG_IGN)
        return [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }
}
