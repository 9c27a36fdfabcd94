/// A slot's presses not yet acknowledged by DRS (or parked), with what the device knows of their last call: the
/// outbox's entries (`Outbox`), at most one per slot.
extension Outbox {
    struct Entry: Codable, Sendable, Equatable {
        var slot: String
        /// Wall-clock times of the presses this entry stands for, oldest first.
        var pressedAt: [Double]
        var attempts: Int = 0
        var parkedReason: String?
        /// Wall-clock time of the first replenish call for this entry whose answer never came (written before
        /// the call leaves): DRS may have placed that order. Cleared by any answer.
        var unansweredSince: Double?
        /// The boot (`BootIdentity`: the agent's mark of this boot; nil when it could not be known) of the call
        /// `unansweredSince` stands for: after a reboot the wall clock may be a restored one (fake-hwclock,
        /// timesyncd's clock file) that makes an old call look seconds old, so a call of another boot waits for
        /// a synchronised clock (`waitsForClock`).
        var unansweredBoot: String?
        /// The run of the agent that made that call (`AgentRun.id`): a mark of the running agent is of this
        /// boot whatever else can be known.
        var unansweredRun: String?
        /// CLOCK_BOOTTIME (seconds since the boot began) when that call was made: in the same boot, its age is
        /// this clock's difference, which no step of the wall clock changes.
        var unansweredUptime: Double?
        /// The pairing the press was made under (`TokenSet.pairingId`).
        var pairingId: String?

        var isParked: Bool { parkedReason != nil }

        init(
            slot: String, pressedAt: [Double], attempts: Int = 0, parkedReason: String? = nil,
            unansweredSince: Double? = nil
        ) {
            self.slot = slot
            self.pressedAt = pressedAt
            self.attempts = attempts
            self.parkedReason = parkedReason
            self.unansweredSince = unansweredSince
        }

        // A file edited by hand or damaged in a way JSON still parses must not crash the agent: the attempt
        // count (only a backoff input) is clamped, and the press itself is kept.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            slot = try container.decode(String.self, forKey: .slot)
            pressedAt = try container.decode([Double].self, forKey: .pressedAt)
            // Read as a Double so that a count too large for an Int (1e19) is clamped too, not a decoding error
            // that would move the whole file, and its presses, aside.
            let attempts = try container.decodeIfPresent(Double.self, forKey: .attempts) ?? 0
            self.attempts = Int(min(max(attempts.rounded(.down), 0), Double(Outbox.maximumAttempts)))
            parkedReason = try container.decodeIfPresent(String.self, forKey: .parkedReason)
            unansweredSince = try container.decodeIfPresent(Double.self, forKey: .unansweredSince)
            unansweredBoot = try container.decodeIfPresent(String.self, forKey: .unansweredBoot)
            unansweredRun = try container.decodeIfPresent(String.self, forKey: .unansweredRun)
            unansweredUptime = try container.decodeIfPresent(Double.self, forKey: .unansweredUptime)
            pairingId = try container.decodeIfPresent(String.self, forKey: .pairingId)
        }
    }
}
