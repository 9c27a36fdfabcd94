import Synchronization

/// Typed events from one service to the services that follow it (token state, outbox changes, the pairing
/// window). Each subscriber gets its own `AsyncStream` and reads it in its own task: `publish` never waits
/// for a subscriber, so no subscriber's work runs inside the publisher's critical section (an actor's state
/// change followed by an fsync in somebody else's handler, as the observer lists did). A subscriber that
/// falls behind keeps the newest `buffer` events; subscribe before the publisher starts to see them all.
final class Broadcast<Element: Sendable>: Sendable {
    private struct Subscribers {
        var next = 0
        var continuations:
            [Int: (continuation: AsyncStream<Element>.Continuation, wants: @Sendable (Element) -> Bool)] =
                [:]
        var finished = false
    }

    private let subscribers = Mutex(Subscribers())
    private let buffer: Int

    init(buffer: Int = 64) { self.buffer = buffer }

    /// A stream of every event published from now on that `wants` (all, by default); it ends when the broadcast
    /// finishes. An event a subscriber does not want is never handed to it, so it never wakes it.
    func subscribe(where wants: @escaping @Sendable (Element) -> Bool = { _ in true }) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: Element.self, bufferingPolicy: .bufferingNewest(buffer))
        let id: Int? = subscribers.withLock { subscribers in
            guard !subscribers.finished else { return nil }
            let id = subscribers.next
            subscribers.next += 1
            subscribers.continuations[id] = (continuation, wants)
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Hands `element` to every subscriber without waiting for any of them.
    func publish(_ element: Element) {
        let subscribers = subscribers.withLock { Array($0.continuations.values) }
        for subscriber in subscribers where subscriber.wants(element) { subscriber.continuation.yield(element) }
    }

    /// Ends every stream (after the events already published).
    func finish() {
        let continuations = subscribers.withLock { subscribers in
            subscribers.finished = true
            defer { subscribers.continuations = [:] }
            return subscribers.continuations.values.map(\.continuation)
        }
        for continuation in continuations { continuation.finish() }
    }

    var subscriberCount: Int { subscribers.withLock { $0.continuations.count } }
}
