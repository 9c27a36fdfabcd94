/// Records what `status` reads of the running daemon (`ShownStatus`, in the runtime directory): the token state
/// (never a token), when the pairing window closes, and the code of code-based linking. It follows the streams
/// in its own task, so no token, window or linking change waits for the file.
enum ShownStatusRecorder {
    static func follow<C: Clock>(
        status: ShownStatusBook, tokens: AsyncStream<TokenEvent>, window: AsyncStream<PairingWindowKeeper<C>.State>,
        linking: AsyncStream<LinkingCode?>
    ) async where C.Duration == Duration {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await case .changed(let state) in tokens { await status.recordTokenState(state) }
            }
            group.addTask {
                for await state in window { await status.recordPairingWindow(closesAt: state.closesAt) }
            }
            group.addTask {
                for await code in linking { await status.recordLinkingCode(code) }
            }
        }
    }
}

extension ShownStatusRecorder {
    /// The shown status's recorder as the daemon runs it.
    struct Part<C: Clock>: DaemonPart where C.Duration == Duration {
        let status: ShownStatusBook
        let tokens: AsyncStream<TokenEvent>
        let window: AsyncStream<PairingWindowKeeper<C>.State>
        let linking: AsyncStream<LinkingCode?>
        var description: String { "status" }

        func work() async {
            await ShownStatusRecorder.follow(status: status, tokens: tokens, window: window, linking: linking)
        }
    }
}
