/// The schedule of `TokenManager`: the loop that carries out `RefreshTimeline`'s actions (refresh before expiry,
/// back off, write again, wait), and the nudge when the wall clock is set.
extension TokenManager {
    /// The wall clock was just set: a refresh that is backing off (TLS fails while the clock says 1970) is
    /// tried again now.
    func retryNow() {
        refreshing.timeline.clockSet(at: time.clock.now)
        time.waker.ring()
    }

    /// Carries out the timeline's actions until it says wait; returns the wait.
    func step() async -> LoopStep<C.Instant> {
        var worked = false
        while !Task.isCancelled {
            // Held: no refresh until `release` (which rings) or a new pairing.
            if serialHold.refusal != nil { return .wait(until: nil, worked: worked) }
            let facts = tokens.map { current in
                RefreshTimeline<C.Instant>.Facts(
                    paired: true,
                    secondsUntilRefresh: RefreshSchedule.secondsUntilRefresh(
                        now: time.wallTime(), expiresAt: current.accessTokenExpiresAt,
                        lifetime: current.accessTokenLifetime, jitter: refreshing.timeline.jitter),
                    lifetime: current.accessTokenLifetime)
            }
            let unpaired = RefreshTimeline<C.Instant>.Facts(paired: false, secondsUntilRefresh: 0, lifetime: 0)
            switch refreshing.timeline.next(facts ?? unpaired, at: time.clock.now) {
            case .waitForPairing:
                return .wait(until: nil, worked: worked)
            case .startupDelay(let window):
                refreshing.timeline.startupWait(window: window, at: time.clock.now, using: &time.random)
            case .retryWrite:
                if let tokens { await save(tokens) }
                worked = true
            case .refresh(let reason):
                // A failure set the retry gate (or wiped the pairing): the next action waits for it.
                _ = try? await refresh(reason: reason.rawValue, scheduled: reason)
                worked = true
            case .wait(let until):
                return .wait(until: until, worked: worked)
            }
        }
        return .wait(until: nil, worked: worked)
    }

    /// The schedule: carries out `RefreshTimeline`'s actions (refresh, back off, write again, wait) until
    /// cancelled; a change (pairing, refresh, failure) ends a wait early.
    func run() async {
        while !Task.isCancelled { await time.waker.wait(for: await step(), clock: time.clock) }
    }
}

extension TokenManager: LoopingActor {}
