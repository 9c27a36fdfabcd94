import Synchronization

/// Ends a transfer in flight from another thread (`CurlEasy.perform(_:abort:)`): set when the task that waits
/// for the answer is cancelled (a stop), read by libcurl's progress callback on the lane's thread.
final class TransferAbort: Sendable {
    private let flag = Atomic<Bool>(false)
    func abort() { flag.store(true, ordering: .relaxed) }
    var isAborted: Bool { flag.load(ordering: .relaxed) }
}
