import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// Issue 42.3: every blocking file primitive calls the one off-loop check (`OffLoop`), so that once the daemon
/// serves, a durable write, a directory's fsync or a shred on the event loop stops a debug build. Here the check is
/// told every thread is the loop's and records instead of stopping.
@Suite(.serialized, .tags(.unit)) struct OffLoopTests {
    @Test func everyBlockingFilePrimitiveCallsTheCheck() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("offloop-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = Mutex<[String]>([])
        let (servingBefore, onLoopBefore, violationBefore) = (
            OffLoop.serving.load(ordering: .relaxed), OffLoop.onLoop.withLock { $0 }, OffLoop.violation.withLock { $0 }
        )
        OffLoop.onLoop.withLock { $0 = { true } }
        OffLoop.violation.withLock { $0 = { message in seen.withLock { $0.append(message) } } }
        OffLoop.serving.store(true, ordering: .relaxed)
        defer {
            OffLoop.serving.store(servingBefore, ordering: .relaxed)
            OffLoop.onLoop.withLock { $0 = onLoopBefore }
            OffLoop.violation.withLock { $0 = violationBefore }
        }
        let file = directory + "/state.json"
        func reported(_ body: () throws -> Void) throws -> [String] {
            seen.withLock { $0.removeAll() }
            try body()
            return seen.withLock { $0 }.filter { $0.contains(directory) }
        }
        #expect(try reported { try POSIX.writeFileAtomically(file, Array("{}".utf8)) }.count >= 1)
        #expect(try reported { try POSIX.syncDirectory(directory) }.count == 1)
        #expect(try reported { try POSIX.shred(file) }.count >= 1)
        try POSIX.writeFileAtomically(file, Array("{}".utf8), durable: false)
        #expect(try reported { try POSIX.shredEntry(file) }.count >= 1)
        // Nothing durable: a file of the runtime directory (a tmpfs) may be written anywhere.
        #expect(try reported { try POSIX.writeFileAtomically(file, Array("{}".utf8), durable: false) }.isEmpty)
        // Before the daemon serves (its start), nothing is reported.
        OffLoop.serving.store(false, ordering: .relaxed)
        #expect(try reported { try POSIX.syncDirectory(directory) }.isEmpty)
    }
}
