import Foundation
import Synchronization
import Testing

@testable import ReplenishAgent

/// Issue 42.3: every blocking file primitive of `POSIX` calls the one off-loop check (`OffLoop`), so that once the
/// daemon serves, an open, a read, a stat, a rename, an unlink, a chmod, a mkdir, a listing, a write, an fsync or a
/// shred on the event loop stops a debug build. Here the check is told every thread is the loop's and records
/// instead of stopping; each primitive is called on its own, so one that lacks the check fails its line.
@Suite(.serialized, .tags(.unit)) struct OffLoopTests {
    /// The primitives, each as a call on a prepared directory (`file` exists, `other` does not).
    static let primitives: [(name: String, call: @Sendable (_ directory: String) throws -> Void)] = [
        ("openFile", { _ = try POSIX.openFile($0 + "/file") }),
        ("OpenFile.readAll", { directory in try OffLoopTests.opened(directory) { _ = try $0.readAll(limit: 64) } }),
        ("OpenFile.readPrefix", { directory in try OffLoopTests.opened(directory) { _ = try $0.readPrefix(8) } }),
        (
            "OpenFile.replaceContents",
            { directory in try OffLoopTests.opened(directory) { try $0.replaceContents([1]) } }
        ),
        ("readFile", { _ = try POSIX.readFile($0 + "/file") }),
        ("status", { _ = try POSIX.status($0 + "/file") }),
        ("linkStatus", { _ = try POSIX.linkStatus($0 + "/file") }),
        ("exists", { _ = POSIX.exists($0 + "/file") }),
        ("cannotWriteIn", { _ = POSIX.cannotWriteIn($0) }),
        ("directoryEntries", { _ = try POSIX.directoryEntries($0) }),
        ("makeDirectory", { try POSIX.makeDirectory($0 + "/made", 0o700) }),
        ("setMode", { try POSIX.setMode($0 + "/file", 0o600) }),
        ("renameFile", { try POSIX.renameFile($0 + "/file", to: $0 + "/other") }),
        ("unlinkEntry", { try POSIX.unlinkEntry($0 + "/file") }),
        ("removeFile", { try POSIX.removeFile($0 + "/file") }),
        ("writeFileAtomically", { try POSIX.writeFileAtomically($0 + "/file", Array("{}".utf8)) }),
        (
            "writeFileAtomically(durable: false)",
            {
                try POSIX.writeFileAtomically($0 + "/file", Array("{}".utf8), durable: false)
            }
        ),
        ("syncDirectory", { try POSIX.syncDirectory($0) }),
        ("checkWritable", { try POSIX.checkWritable($0) }),
        ("shred", { try POSIX.shred($0 + "/file") }),
        ("shredEntry", { try POSIX.shredEntry($0 + "/file") }),
    ]

    static func opened(_ directory: String, _ body: (POSIX.OpenFile) throws -> Void) throws {
        // Opened as before the daemon serves: only the descriptor's call is looked at.
        let file = try OffLoop.$servingOnThisTask.withValue(false) {
            try POSIX.openFile(directory + "/file", .readWrite)
        }
        try body(file)
    }

    @Test(arguments: primitives.map(\.name))
    func aBlockingFilePrimitiveOnTheLoopIsAViolation(name: String) throws {
        let call = try #require(Self.primitives.first { $0.name == name }?.call)
        let (directory, reported) = try Self.onTheLoop()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try reported { try call(directory) }.count >= 1, "\(name) lacks OffLoop.check")
    }

    @Test func aFileInMemoryIsSaidSoAtTheCallAndNotReported() throws {
        let (directory, reported) = try Self.onTheLoop()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try reported { _ = POSIX.exists(directory + "/file", .memory) }.isEmpty)
        #expect(try reported { _ = try POSIX.readFile(directory + "/file", .memory) }.isEmpty)
        #expect(
            try reported { _ = try POSIX.openFile(directory + "/file", medium: .memory).readAll(limit: 64) }.isEmpty)
    }

    @Test func beforeTheDaemonServesNothingIsReported() throws {
        let (directory, reported) = try Self.onTheLoop(serving: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for primitive in Self.primitives {
            #expect(try reported { try primitive.call(directory) }.isEmpty, "\(primitive.name)")
            try Self.prepare(directory)
        }
    }

    /// A fresh directory holding `file`, and a function that runs a body as if on the serving daemon's loop and
    /// returns what the check reported of that directory.
    static func onTheLoop(serving: Bool = true) throws -> (String, (() throws -> Void) throws -> [String]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "offloop-\(getpid())-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try prepare(directory)
        let reported: (() throws -> Void) throws -> [String] = { body in
            let seen = Mutex<[String]>([])
            let record: @Sendable (String) -> Void = { message in seen.withLock { $0.append(message) } }
            try OffLoop.$recorded.withValue(record) {
                try OffLoop.$servingOnThisTask.withValue(serving) { try body() }
            }
            return seen.withLock { $0 }.filter { $0.contains(directory) }
        }
        return (directory, reported)
    }

    static func prepare(_ directory: String) throws {
        try? FileManager.default.removeItem(atPath: directory + "/other")
        try? FileManager.default.removeItem(atPath: directory + "/made")
        try Data("{}".utf8).write(to: URL(fileURLWithPath: directory + "/file"))
    }
}
