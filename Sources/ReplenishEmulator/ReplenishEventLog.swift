import Foundation

/// What happened to one `/replenish/...` request, for `GET /admin/events`.
struct ReplenishEvent: Sendable, Codable {
    enum Outcome: String, Sendable, Codable {
        /// A new order was placed.
        case placed
        /// Answered `ORDER_INPROGRESS` (the order logic ran).
        case inProgress
        /// Refused by a check: token, version headers, unknown slot, not subscribed, method, size.
        case rejected
        /// A fault answered (or dropped) the request instead of the work.
        case faulted
    }

    var seq: Int
    /// The path after `/replenish/`, percent-decoded when possible.
    var slot: String
    var outcome: Outcome
    /// The status answered, or that the work produced when the answer was dropped; nil for `drop`.
    var status: Int?
    var fault: Fault.Kind?
    /// Whether the connection was closed instead of answering (`drop`, `dropAfterWork`).
    var answerDropped: Bool
    var orderId: String?
    var detailCode: String?
    var at: Date
    /// The connection the request came on and its place on it (see `EmulatorRequest`).
    var connection: Int
    var requestOnConnection: Int

    var json: JSONValue {
        .obj([
            "seq": .number(Double(seq)), "slot": .string(slot), "outcome": .string(outcome.rawValue),
            "status": status.map { .number(Double($0)) } ?? .null,
            "fault": fault.map { .string($0.rawValue) } ?? .null, "answerDropped": .bool(answerDropped),
            "orderId": orderId.map { .string($0) } ?? .null, "detailCode": detailCode.map { .string($0) } ?? .null,
            "at": .number(at.timeIntervalSince1970), "connection": .number(Double(connection)),
            "requestOnConnection": .number(Double(requestOnConnection)),
        ])
    }
}

/// The newest replenish events, numbered from 1 in the order the emulator handled the requests.
struct ReplenishEventLog: Sendable {
    static let limit = 100_000

    /// `entries[start...]` are kept; the prefix is dropped in batches so that appending stays O(1) amortized.
    private var entries: [ReplenishEvent] = []
    private var start = 0
    private(set) var lastSeq = 0

    init() {}

    /// A log that continues from `kept` (oldest first), numbering from `lastSeq + 1`: a `--state-file` reload.
    init(restoring kept: [ReplenishEvent], lastSeq: Int) {
        entries = Array(kept.suffix(Self.limit))
        self.lastSeq = max(lastSeq, entries.last?.seq ?? 0)
    }

    /// Every kept entry, oldest first.
    var kept: ArraySlice<ReplenishEvent> { entries[start...] }

    /// Whether a request path is a replenish call (the router's `replenish/*`, or a malformed variant of it).
    static func isReplenish(_ request: EmulatorRequest) -> Bool {
        request.path == "/replenish" || request.path.hasPrefix("/replenish/")
    }

    /// The slot part of a replenish path.
    static func slot(of request: EmulatorRequest) -> String {
        if let segments = request.pathSegments, segments.count >= 2 {
            return segments.dropFirst().joined(separator: "/")
        }
        return String(request.path.dropFirst("/replenish/".count))
    }

    mutating func append(
        _ request: EmulatorRequest, outcome: ReplenishEvent.Outcome, status: Int?, fault: Fault.Kind?,
        answerDropped: Bool, orderId: String?, detailCode: String?, at: Date
    ) {
        lastSeq += 1
        entries.append(
            ReplenishEvent(
                seq: lastSeq, slot: Self.slot(of: request), outcome: outcome, status: status, fault: fault,
                answerDropped: answerDropped, orderId: orderId, detailCode: detailCode, at: at,
                connection: request.connection, requestOnConnection: request.requestOnConnection))
        if entries.count - start > Self.limit { start += 1 }
        if start >= Self.limit / 10 {
            entries.removeFirst(start)
            start = 0
        }
    }

    /// The kept entries with `seq > since` (all when `since` is 0), oldest first.
    func entries(since: Int) -> ArraySlice<ReplenishEvent> {
        guard start < entries.count, since < lastSeq else { return [] }
        let firstSeq = entries[start].seq
        let from = start + max(0, since + 1 - firstSeq)
        return from < entries.count ? entries[from...] : []
    }
}
