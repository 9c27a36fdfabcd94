import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// The real agent on a flash whose every flush stalls (issue 30): an `LD_PRELOAD` shim, built here, makes each
/// `fsync` and `fdatasync` of the agent take `stall` seconds and logs it. The event loop must not feel it.
@Suite(.serialized, .onOwnThread, .tags(.process)) struct FlashStallTests {
    static let stall = 1.5

    /// The shim's C source: each call is logged (monotonic time in ms and the file's path) before it stalls.
    static let shimSource = #"""
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <fcntl.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>
        #include <unistd.h>

        static void stall(int fd, const char *what) {
            const char *ms = getenv("FSYNC_STALL_MS");
            const char *log = getenv("FSYNC_LOG");
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (log) {
                char link[64], target[512], thread[32] = "", line[700];
                snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
                ssize_t n = readlink(link, target, sizeof target - 1);
                target[n > 0 ? n : 0] = 0;
                /* The calling thread's name: the event loop's is NIO-SGLTN-…, the disk lane's TP-#…. */
                int comm = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC);
                if (comm >= 0) {
                    ssize_t got = read(comm, thread, sizeof thread - 1);
                    thread[got > 0 ? got - 1 : 0] = 0;
                    close(comm);
                }
                int out = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
                if (out >= 0) {
                    int len = snprintf(line, sizeof line, "%lld %s %s %s\n",
                        (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, what, thread, target);
                    if (write(out, line, len) < 0) { }
                    close(out);
                }
            }
            long wait = ms ? atol(ms) : 0;
            /* FSYNC_STALL_FILE, when set: the stall is the number in that file, 0 while it does not exist (a
               test turns the stall on and off while the agent runs). */
            const char *file = getenv("FSYNC_STALL_FILE");
            if (file) {
                char text[32] = "";
                int in = open(file, O_RDONLY | O_CLOEXEC);
                if (in >= 0) {
                    ssize_t got = read(in, text, sizeof text - 1);
                    text[got > 0 ? got : 0] = 0;
                    close(in);
                }
                wait = atol(text);
            }
            struct timespec pause = { wait / 1000, (wait % 1000) * 1000000 };
            while (nanosleep(&pause, &pause) != 0) { }
        }

        int fsync(int fd) {
            static int (*real)(int);
            if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
            stall(fd, "fsync");
            return real(fd);
        }

        int fdatasync(int fd) {
            static int (*real)(int);
            if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
            stall(fd, "fdatasync");
            return real(fd);
        }
        """#

    /// Builds the shim in the harness's directory (the C compiler the package's C targets build with).
    static func buildShim(_ harness: Harness) throws -> String {
        let source = harness.directory + "/fsync-stall.c"
        let library = harness.directory + "/fsync-stall.so"
        try shimSource.write(toFile: source, atomically: true, encoding: .utf8)
        let built = try harness.run("/usr/bin/cc", ["-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"])
        try #require(built.status == 0, "the fsync shim did not build: \(built.error)")
        return library
    }

    /// An emulator with 30 s access tokens (the agent refreshes on its own every 22 s or so), a config, and the
    /// agent started under the shim (`stallMilliseconds` per flush, logged to the returned `flushLog`), with
    /// `extra` in its environment.
    static func startShimmedAgent(_ harness: Harness, stallMilliseconds: Int, extra: [String: String] = [:]) throws
        -> (emulator: String, config: String, pairingPort: Int, flushLog: String, agent: Process)
    {
        let shim = try buildShim(harness)
        let flushLog = harness.directory + "/flushes.log"
        let emulator = try harness.startEmulator(["--slots", "slot-1", "--access-token-lifetime", "30"])
        let pairingPort = try FreePorts.take()
        let config = try harness.writeConfig(emulator: emulator, pairingPort: pairingPort)
        var environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        environment["LD_PRELOAD"] = shim
        environment["FSYNC_STALL_MS"] = "\(stallMilliseconds)"
        environment["FSYNC_LOG"] = flushLog
        let agent = try harness.startAgent(config: config, environment: environment)
        return (emulator, config, pairingPort, flushLog, agent)
    }

    /// The shim's log: (monotonic ms, the calling thread's name, path) of each flush.
    static func flushes(_ log: String) -> [(at: Double, thread: String, path: String)] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 3)
            guard fields.count == 4, let at = Double(fields[0]) else { return nil }
            return (at, String(fields[2]), String(fields[3]))
        }
    }

    static func monotonicMilliseconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) * 1000 + Double(now.tv_nsec) / 1_000_000
    }

    /// Asks the control socket for `GET /state` every 100 ms on a thread of its own and keeps the longest wait.
    final class StatePoller: @unchecked Sendable {
        private let socket: String
        private let state = Mutex<(longest: Double, asked: Int, failed: Int, stop: Bool)>((0, 0, 0, false))
        private let done = DispatchSemaphore(value: 0)

        init(socket: String) { self.socket = socket }

        func start() {
            Thread.detachNewThread { [self] in
                let easy = try? CurlEasy(options: .init(unixSocketPath: socket))
                while !state.withLock({ $0.stop }) {
                    let began = FlashStallTests.monotonicMilliseconds()
                    let answered =
                        (try? easy?.perform(HTTPRequest(method: .get, url: "http://localhost/state")))?.status == 200
                    let took = (FlashStallTests.monotonicMilliseconds() - began) / 1000
                    state.withLock {
                        $0.longest = max($0.longest, took)
                        $0.asked += 1
                        if !answered { $0.failed += 1 }
                    }
                    usleep(100_000)
                }
                done.signal()
            }
        }

        func stop() -> (longest: Double, asked: Int, failed: Int) {
            state.withLock { $0.stop = true }
            done.wait()
            return state.withLock { ($0.longest, $0.asked, $0.failed) }
        }
    }

    /// Receives the agent's notify messages on a thread of its own, each stamped when it arrived (the test's
    /// own thread is busy in commands for seconds at a time, and a ping read late would look late).
    final class NotifyListener: @unchecked Sendable {
        private let socket: NotifySocket
        private let state = Mutex<(messages: [(at: Double, text: String)], stop: Bool)>(([], false))
        private let done = DispatchSemaphore(value: 0)

        init(_ socket: NotifySocket) { self.socket = socket }

        func start() {
            Thread.detachNewThread { [self] in
                while !state.withLock({ $0.stop }) {
                    var descriptor = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
                    _ = poll(&descriptor, 1, 50)
                    while let message = socket.receive() {
                        let at = FlashStallTests.monotonicMilliseconds()
                        state.withLock { $0.messages.append((at, message)) }
                    }
                }
                done.signal()
            }
        }

        var messages: [(at: Double, text: String)] { state.withLock { $0.messages } }

        func stop() {
            state.withLock { $0.stop = true }
            done.wait()
        }
    }

    /// A pairing, a press that orders and token refreshes, every flush stalled 1.5 s: the control socket answers
    /// within 0.5 s every time, no watchdog ping is later than half of `WATCHDOG_USEC` plus 0.5 s, and the
    /// replenish request leaves within two stalls and a second of the press. Then a SIGKILL in the middle of a
    /// stalled write, and a restart: still exactly one order.
    @Test func onAFlashThatStallsEveryFlushTheLoopAnswersPingsAndOrdersOnce() throws {
        let harness = Harness()
        let notify = try NotifySocket()
        let (emulator, config, pairingPort, flushLog, agent) = try Self.startShimmedAgent(
            harness, stallMilliseconds: Int(Self.stall * 1000),
            extra: ["NOTIFY_SOCKET": notify.variable, "WATCHDOG_USEC": "4000000"])  // a ping due every 2 s
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }

        let listener = NotifyListener(notify)
        listener.start()
        try harness.waitUntil("READY=1") { listener.messages.contains { $0.text.hasPrefix("READY=1") } }
        let readyAt = Self.monotonicMilliseconds()
        let poller = StatePoller(socket: harness.directory + "/state/control.sock")
        poller.start()

        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first duties", timeout: 60) {
            return try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }

        // Pressed through the simulated board's control socket from a thread of the test (no command to start):
        // the press answers once it is durable, and the request is timed from the press itself.
        let socket = harness.directory + "/state/control.sock"
        let answered = DispatchSemaphore(value: 0)
        let pressStatus = Mutex<Int?>(nil)
        let pressed = Self.monotonicMilliseconds()
        Thread.detachNewThread {
            let answer = try? CurlEasy(options: .init(unixSocketPath: socket)).perform(
                HTTPRequest(
                    method: .post, url: "http://localhost/press", headers: [("Content-Type", "application/json")],
                    body: Array(#"{"input":"button","holdSeconds":0.05}"#.utf8)))
            pressStatus.withLock { $0 = answer?.status }
            answered.signal()
        }
        var left: Double?
        try harness.waitUntil("the replenish request", timeout: 30) {
            if try harness.replenishEvents(emulator).count >= 1 { left = Self.monotonicMilliseconds() }
            return left != nil
        }
        #expect(answered.wait(timeout: .now() + 30) == .success)
        #expect(pressStatus.withLock { $0 } == 200)
        let took = ((left ?? 0) - pressed) / 1000
        // Measured from the test's side: the emulator's event is seen up to one poll (and a request) later.
        #expect(took <= 2 * Self.stall + 1, "the replenish request left \(took) s after the press")
        try harness.waitUntil("the order's answer", timeout: 30) {
            return try harness.slotStatus(config: config, "slot-1")["lastResult"] as? String == "TEST_ORDER_PLACED"
        }
        try harness.waitUntil("a token refresh", timeout: 60) {
            return harness.agentLogs.contains("access token refreshed")
        }
        let polled = poller.stop()
        listener.stop()
        let pings = listener.messages.filter { $0.text == "WATCHDOG=1\n" }.map(\.at)
        #expect(polled.asked >= 50 && polled.failed == 0, "\(polled)")
        #expect(polled.longest <= 0.5, "GET /state waited \(polled.longest) s")
        let gaps = zip(pings, pings.dropFirst()).map { ($1 - $0) / 1000 }
        #expect(pings.count >= 10)
        #expect((gaps.max() ?? 0) <= 2 + 0.5, "watchdog pings came \(gaps.max() ?? 0) s apart: \(pings)")
        // Every flush once the agent serves ran on a disk lane's thread, none on the event loop's (the start's
        // sweep of the state directory, before READY, still syncs it there).
        let threads = Set(Self.flushes(flushLog).filter { $0.at > readyAt }.map(\.thread))
        #expect(!threads.contains { $0.hasPrefix("NIO-") }, "\(threads)")

        // A second press, and a SIGKILL while its write stalls; the restart (without the shim) orders once.
        let before = Self.flushes(flushLog).count
        let second = Process()
        second.executableURL = URL(fileURLWithPath: Harness.binDirectory + "/replenish-agent")
        second.arguments = ["press", "button", "--config", config]
        try Harness.spawning.withLock { try second.run() }
        try harness.waitUntil("a stalled flush of the second press", timeout: 10) {
            Self.flushes(flushLog).count > before
        }
        try harness.kill9(agent)
        second.waitUntilExit()
        let restarted = try harness.startAgent(config: config)
        defer { if restarted.isRunning { kill(restarted.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the outbox to empty", timeout: 60) {
            let status = try harness.statusJSON(config: config)
            return status["pendingOrders"] as? Int == 0 && status["paired"] as? Bool == true
        }
        // The first press ordered once; the second, cut short in its write, ordered at most once (DRS answers
        // ORDER_INPROGRESS while the first is open, which places nothing).
        let placed = try harness.replenishEvents(emulator).filter {
            $0["outcome"] as? String == "placed"
        }
        #expect(placed.count == 1, "\(placed)")
        try harness.stop(restarted)
        harness.expectNoSecretsInAgentOutput()
    }

    /// #40.8: the agent stops (SIGTERM) or dies (SIGKILL) after the press is written (its outbox renamed into
    /// place: the directory's flush is stalled) and before its answer: `press` says what is true, that the
    /// press is kept and will be ordered, with its own exit status (#50.8: not 0, which says the agent confirmed
    /// it, nor 1, a failure), and the restarted agent orders it, once.
    @Test(arguments: [SIGTERM, SIGKILL])
    func aStopAfterThePressIsWrittenIsToldTheTruth(signal: Int32) throws {
        let harness = Harness()
        let (emulator, config, pairingPort, flushLog, agent) = try Self.startShimmedAgent(
            harness, stallMilliseconds: 2000)
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the pairing endpoints", timeout: 60) { Harness.pairingPortAnswers(pairingPort) }
        try harness.pair(emulator: emulator, pairingPort: pairingPort)
        try harness.waitUntil("the first duties", timeout: 90) {
            try harness.slotStatus(config: config, "slot-1")["subscribed"] as? Bool == true
        }
        let before = Self.flushes(flushLog).count
        let press = Process()
        press.executableURL = URL(fileURLWithPath: Harness.binDirectory + "/replenish-agent")
        press.arguments = ["press", "button", "--config", config]
        let output = Pipe()
        press.standardOutput = output
        press.standardError = output
        try Harness.spawning.withLock { try press.run() }
        // The outbox's flush, then the state directory's: the rename between them wrote the press.
        try harness.waitUntil("the press written, the directory's flush stalled", timeout: 30) {
            let flushes = Self.flushes(flushLog).dropFirst(before)
            guard let outbox = flushes.firstIndex(where: { $0.path.contains("outbox.json") }) else { return false }
            return flushes[outbox...].contains { $0.path.hasSuffix("/state") }
        }
        kill(agent.processIdentifier, signal)
        press.waitUntilExit()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        // The truth either way, never "failed": kept (2) when the stop came first, or accepted (0) when the
        // directory's flush ended before the stop reached the control socket (a race on a loaded machine).
        #expect(
            [0, PressCommand.keptExitCode].contains(press.terminationStatus),
            "press exited \(press.terminationStatus): \(said)")
        if press.terminationStatus == PressCommand.keptExitCode {
            #expect(said.contains("the press was written"), "\(said)")
        }
        try harness.waitUntil("the agent gone") { !agent.isRunning }
        let restarted = try harness.startAgent(config: config)
        defer { if restarted.isRunning { kill(restarted.processIdentifier, SIGKILL) } }
        try harness.waitUntil("the press ordered", timeout: 60) {
            let status = try harness.statusJSON(config: config)
            return status["pendingOrders"] as? Int == 0 && status["paired"] as? Bool == true
        }
        let placed = try harness.replenishEvents(emulator).filter { $0["outcome"] as? String == "placed" }
        #expect(placed.count == 1, "\(placed)")
        harness.expectNoSecretsInAgentOutput()
    }
}
