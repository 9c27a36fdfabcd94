@testable import ReplenishAgent

/// A digital line's edges as a seeded test draws them: `(milliseconds, level)`, each change at the current time.
struct EdgeScript {
    var edges: [(Int, Bool)] = []
    var time = 0
    var level = false

    /// Changes the level now, then lets a time drawn from `gap` (milliseconds) pass.
    mutating func toggle(thenWait gap: ClosedRange<Int>, using random: inout RandomSource) {
        level.toggle()
        edges.append((time, level))
        time += Int.random(in: gap, using: &random)
    }

    /// Sets the level to `to` now.
    mutating func set(_ to: Bool) {
        edges.append((time, to))
        level = to
    }
}
