/// Reading `agent.json`'s `buttons`: each input of the board file mapped to a slot, with DRS's order rules
/// (program drs) or what the input tells of its slot's supply (program alexa).
extension AgentConfig {
    /// The buttons of `value`, checked against `board` when it could be read; each slot joins `placeholders`.
    /// `sensorProblems`: an input's supply sensor (program alexa) could not be read.
    static func parseButtons(
        _ value: JSONValue, board: BoardFile?, program: Program,
        placeholders: inout [(path: String, key: PlaceholderKey, value: String?)], problems: inout Problems
    ) -> (buttons: [Button], sensorProblems: Bool) {
        guard case .array(let items) = value else {
            problems.add("buttons", "must be an array")
            return ([], false)
        }
        if items.isEmpty { problems.add("buttons", "must map at least one input to a slot") }
        let isDRS = program == .drs
        var buttons: [Button] = []
        var sensorProblems = false
        var inputsSeen: Set<String> = []
        for (index, item) in items.enumerated() {
            guard var reader = ObjectReader(item, path: "buttons[\(index)]", problems: &problems) else {
                continue
            }
            let input = reader.string("input", problems: &problems)
            let slot = reader.string("slot", problems: &problems)
            if let input {
                if let board, board.input(named: input) == nil {
                    problems.add(reader.child("input"), "the board file has no input named \"\(input)\"")
                }
                if !inputsSeen.insert(input).inserted {
                    problems.add(reader.child("input"), "\"\(input)\" is mapped twice")
                }
            }
            if let slot, !isValidSlot(slot) {
                problems.add(reader.child("slot"), "must be 1 to 255 characters of A-Z a-z 0-9 - . _ ~")
            }
            placeholders.append((reader.child("slot"), .slot, slot))
            // The alexa program reports every press and level; DRS's order rules are not its own.
            var sensor: SupplySensor?
            if isDRS {
                for key in ["usage", "level", "dashReplenishmentId"]
                where reader.value(key, required: false, problems: &problems) != nil {
                    problems.add(reader.child(key), "is for program \"alexa\"")
                }
            } else {
                for key in ["cooldownSeconds", "quantity", "remainingWhenLow"]
                where reader.value(key, required: false, problems: &problems) != nil {
                    problems.add(
                        reader.child(key), "is not used by program \"alexa\" (every press is reported)")
                }
                let kind = input.flatMap { board?.input(named: $0)?.kind }
                sensor = parseSensor(&reader, kind: kind, problems: &problems)
                if board != nil, kind != nil, sensor == nil { sensorProblems = true }
            }
            let cooldown = reader.integer("cooldownSeconds", in: 0...86400, problems: &problems) ?? 60
            let quantity = reader.number("quantity", in: 0.001...1_000_000, problems: &problems)
            let remaining = reader.number("remainingWhenLow", in: 0...1_000_000, problems: &problems)
            if let remaining {
                if let quantity, remaining >= quantity {
                    problems.add(reader.child("remainingWhenLow"), "must be less than quantity (\(quantity))")
                } else if quantity == nil {
                    problems.add(reader.child("remainingWhenLow"), "needs quantity (what a refill holds)")
                }
            }
            reader.reportUnknownKeys(problems: &problems)
            if let input, let slot {
                buttons.append(
                    Button(
                        input: input, slot: slot, cooldownSeconds: cooldown, quantity: quantity,
                        remainingWhenLow: remaining ?? 0, sensor: sensor))
            }
        }
        return (buttons, sensorProblems)
    }
}
