import Logging
import Synchronization
import Testing

@testable import ReplenishAgent

/// `READY=1` promises only that the state files are loaded and the GPIO lines held: the pairing's start (an
/// unpaired device's window, its port and its DNS-SD advertisement) is the systemd part's `afterReady`, which
/// runs once `READY=1` is out, never before it.
@Suite(.tags(.unit)) struct AfterReadyTests {
    /// What happened, in order.
    final class Events: Sendable {
        private let list = Mutex<[String]>([])
        func add(_ event: String) { list.withLock { $0.append(event) } }
        var all: [String] { list.withLock { $0 } }
    }

    /// Records the notifications as they are sent.
    actor Recorder: StatusLineKeeper {
        let events: Events
        init(_ events: Events) { self.events = events }
        func ready() -> String? {
            events.add("READY=1")
            return nil
        }
        func stopping() -> String? {
            events.add("STOPPING=1")
            return nil
        }
    }

    @Test func thePairingStartsOnlyOnceReadyIsOut() async {
        let events = Events()
        let (started, starting) = AsyncStream.makeStream(of: Void.self)
        // No WATCHDOG_USEC: after `afterReady` the notifications wait for the cancellation, with no timer.
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/notify"], pid: 1)
        let notifications = Task {
            await SystemdNotifications.runNotifications(
                notifier: notifier, status: Recorder(events), probes: [], logger: Logger(label: "test"),
                afterReady: {
                    events.add("the pairing's start")
                    starting.yield()
                })
        }
        for await _ in started { break }
        notifications.cancel()
        await notifications.value
        #expect(events.all == ["READY=1", "the pairing's start", "STOPPING=1"])
    }
}
