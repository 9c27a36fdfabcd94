/// One injected fault: what the emulator does to a request instead of (or besides) answering it normally.
enum Fault: Sendable, Equatable {
    /// Answer this status (4xx/5xx) with `body` and an optional `Retry-After`, without doing the work.
    case status(Int, retryAfter: String?, body: String)
    /// Close the connection without answering; the work is not done.
    case drop
    /// Do the work, then close the connection without answering.
    case dropAfterWork
    /// Wait this many seconds (on a timer), then handle the request normally.
    case delay(Double)
    /// `200` with a body that is not JSON but claims to be; the work is not done.
    case garbage
    /// `200` with a 5 MiB body; the work is not done.
    case huge

    /// The kinds, as named in `/admin/faults`, `/admin/stats` and `/admin/events`.
    enum Kind: String, Sendable, CaseIterable, Codable {
        case status, drop, dropAfterWork, delay, garbage, huge
    }

    static let defaultStatusBody = #"{"message":"injected fault"}"#
    /// The longest delay accepted, in seconds.
    static let maximumDelay = 3600.0
    /// The non-JSON body of a `garbage` fault.
    static let garbageBody = Array("<html>garbage".utf8)

    var kind: Kind {
        switch self {
        case .status: .status
        case .drop: .drop
        case .dropAfterWork: .dropAfterWork
        case .delay: .delay
        case .garbage: .garbage
        case .huge: .huge
        }
    }

    /// The fault a name of the random rate's `kinds` list stands for.
    static func named(_ name: String) -> Fault? {
        switch name {
        case "status500": .status(500, retryAfter: nil, body: defaultStatusBody)
        case "status503": .status(503, retryAfter: "1", body: defaultStatusBody)
        case "drop": .drop
        case "dropAfterWork": .dropAfterWork
        case "garbage": .garbage
        case "delay": .delay(1)
        case "huge": .huge
        default: nil
        }
    }

    static let randomKindNames = ["status500", "status503", "drop", "dropAfterWork", "garbage", "delay", "huge"]

    /// Reads `{"kind":…}` as `POST /admin/faults` takes it; the error text says what is wrong.
    static func parse(_ json: JSONValue) -> Result<Fault, AdminError> {
        guard case .object = json else { return .failure("fault must be a JSON object") }
        guard let kindName = json["kind"]?.stringValue else { return .failure("fault.kind must be a string") }
        guard let kind = Kind(rawValue: kindName) else {
            let names = Kind.allCases.map(\.rawValue).joined(separator: ", ")
            return .failure("fault.kind must be one of \(names)")
        }
        switch kind {
        case .status:
            guard let status = json["status"].flatMap(\.integerValue), (400...599).contains(status) else {
                return .failure("fault.status must be an integer from 400 to 599")
            }
            var retryAfter: String?
            switch json["retryAfter"] {
            case nil, .null?:
                break
            case .string(let text)?:
                guard !text.isEmpty, !text.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                    return .failure("fault.retryAfter must be a non-negative integer or a one-line string")
                }
                retryAfter = text
            case let value?:
                guard let seconds = value.integerValue, seconds >= 0 else {
                    return .failure("fault.retryAfter must be a non-negative integer or a one-line string")
                }
                retryAfter = String(seconds)
            }
            var body = defaultStatusBody
            switch json["body"] {
            case nil, .null?: break
            case .string(let text)?: body = text
            default: return .failure("fault.body must be a string")
            }
            return .success(.status(status, retryAfter: retryAfter, body: body))
        case .delay:
            guard let seconds = json["seconds"]?.numberValue, seconds >= 0, seconds <= maximumDelay else {
                return .failure("fault.seconds must be a number from 0 to \(Int(maximumDelay))")
            }
            return .success(.delay(seconds))
        case .drop: return .success(.drop)
        case .dropAfterWork: return .success(.dropAfterWork)
        case .garbage: return .success(.garbage)
        case .huge: return .success(.huge)
        }
    }

    /// The fault as `GET /admin/faults` lists it (the same shape `POST` takes).
    var json: JSONValue {
        switch self {
        case .status(let status, let retryAfter, let body):
            var members: [JSONValue.Member] = [
                .init(key: "kind", value: "status"), .init(key: "status", value: .number(Double(status))),
            ]
            if let retryAfter {
                let value: JSONValue = Int(retryAfter).map { .number(Double($0)) } ?? .string(retryAfter)
                members.append(.init(key: "retryAfter", value: value))
            }
            members.append(.init(key: "body", value: .string(body)))
            return .object(members)
        case .delay(let seconds):
            return .obj(["kind": "delay", "seconds": .number(seconds)])
        default:
            return .obj(["kind": .string(kind.rawValue)])
        }
    }
}

/// A refusal of an admin request: its text becomes `400 {"message":…}`.
struct AdminError: Error, ExpressibleByStringInterpolation, Sendable {
    var message: String

    init(_ message: String) { self.message = message }
    init(stringLiteral value: String) { self.message = value }
}

extension JSONValue {
    /// The value as an `Int` when it is a JSON number without a fraction (and not too large).
    var integerValue: Int? {
        guard let number = numberValue, number == number.rounded(), abs(number) < 9_007_199_254_740_992 else {
            return nil
        }
        return Int(number)
    }
}
