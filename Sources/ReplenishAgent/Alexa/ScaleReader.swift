import Logging

/// A load cell of program alexa (`alexa.scales[]`): every `pollSeconds` it reads the counts the kernel gives in
/// the scale's file (an IIO ADC, such as the HX711's driver, `in_voltage0_raw`) five times on the disk lane, never on
/// the event loop, takes the median (one noisy sample moves nothing), turns it into the slot's level and records it
/// when it moved by `minimumChange` or more since the level last recorded. A file that cannot be read, or that
/// holds no number, is logged (once until it reads again) and the next poll tries again; nothing is recorded from
/// it.
final actor ScaleReader<C: Clock>: LoopingActor where C.Duration == Duration {
    static var samples: Int { 5 }

    private let scale: AgentConfig.Scale
    /// The daemon's disk lane: the scale's file is read there.
    private let disk: DiskLane
    private let reporter: SupplyReporter<C>
    private let clock: C
    private let logger: Logger
    private let waker = Waker()
    private var nextRead: C.Instant
    /// Why the last read failed, while it fails (logged once).
    private var failing: String?

    init(scale: AgentConfig.Scale, reporter: SupplyReporter<C>, clock: C, disk: DiskLane, logger: Logger) {
        self.disk = disk
        self.scale = scale
        self.reporter = reporter
        self.clock = clock
        self.logger = logger
        nextRead = clock.now
    }

    /// The level `counts` stand for, in the scale's measurement: never below 0, a Count whole, a Percentage at
    /// most 100, to the thousandth.
    static func level(counts: Double, scale: AgentConfig.Scale) -> Double {
        var value = max((counts - scale.zeroCounts) / scale.countsPerUnit, 0)
        switch scale.measurement {
        case .count: value = value.rounded()
        case .percentage: value = min(value, 100)
        case .weight: break
        }
        return (value * 1000).rounded() / 1000
    }

    /// The median of the samples' numbers; nil when any sample is not a whole number (text, an empty file).
    static func median(_ samples: [String]) -> Double? {
        let numbers = samples.compactMap { Int64(Substring($0).trimmingCharacters(in: " \t\n\r")) }
        guard numbers.count == samples.count, !numbers.isEmpty else { return nil }
        return Double(numbers.sorted()[numbers.count / 2])
    }

    func run() async {
        while !Task.isCancelled {
            let next = await step()
            await waker.wait(for: next, clock: clock)
        }
    }

    /// Reads when due, records the level when it moved enough; returns the next read's time.
    func step() async -> LoopStep<C.Instant> {
        guard clock.now >= nextRead else { return .wait(until: nextRead, worked: false) }
        nextRead = clock.now.advanced(by: .seconds(scale.pollSeconds))
        let file = scale.file
        let samples: [String]
        do {
            samples = try await disk.run { _ throws(AgentError) in
                try (0..<Self.samples).map { _ throws(AgentError) in
                    guard let bytes = try POSIX.readFile(file, limit: 64) else {
                        throw AgentError(.hardware, "no such file")
                    }
                    return String(decoding: bytes, as: UTF8.self)
                }
            }
        } catch {
            report("cannot read \(file): \(error.message)")
            return .wait(until: nextRead, worked: true)
        }
        guard let counts = Self.median(samples) else {
            report("\(file) holds no whole number of counts")
            return .wait(until: nextRead, worked: true)
        }
        if failing != nil {
            failing = nil
            logger.notice("scale: reading again", metadata: ["alexa.slot": "\(scale.slot)"])
        }
        let level = Self.level(counts: counts, scale: scale)
        let last = await reporter.level(slot: scale.slot)
        if last == nil || abs(level - (last ?? 0)) >= max(scale.minimumChange, 0.001) {
            do { try await reporter.recordReading(slot: scale.slot, value: level) } catch {
                logger.error(
                    "scale: the level could not be recorded",
                    metadata: ["alexa.slot": "\(scale.slot)", "error": "\(error.message)"])
            }
        }
        return .wait(until: nextRead, worked: true)
    }

    private func report(_ reason: String) {
        guard failing != reason else { return }
        failing = reason
        logger.warning(
            "scale: no reading; trying again at the next poll",
            metadata: ["alexa.slot": "\(scale.slot)", "error": "\(reason)"])
    }
}
