import KindredGRPC

/// Calls several services in parallel under one deadline and assembles one answer.
///
/// Each part fetches its piece and returns how to apply it to the answer. Essential parts must succeed: the
/// first essential failure fails the whole call with that part's error. Non-essential parts get at most
/// `partTimeout` (and never more than the call's own deadline); one that fails or is late is left out and
/// named in `missing`, and the answer goes out without it. A part whose service is not deployed is named at
/// once, with no call.
struct FanOut<Answer: Sendable>: Sendable {
    struct Part: Sendable {
        let name: String
        let essential: Bool
        /// nil: the backing service is not deployed.
        let fetch: (@Sendable () async throws -> @Sendable (inout Answer) -> Void)?
    }

    let partTimeout: Duration

    /// The answer built from `start` and every part that arrived, and the names of the parts that did not.
    func gather(_ start: Answer, _ parts: [Part]) async throws -> (answer: Answer, missing: [String]) {
        var answer = start
        var missing = parts.filter { $0.fetch == nil }.map(\.name)
        let timeout = self.partTimeout
        try await withThrowingTaskGroup(of: (String, (@Sendable (inout Answer) -> Void)?).self) { group in
            for part in parts {
                guard let fetch = part.fetch else { continue }
                let name = part.name
                if part.essential {
                    group.addTask { (name, try await fetch()) }
                } else {
                    group.addTask { (name, await Self.optional(fetch, timeout: timeout)) }
                }
            }
            // Essential failures propagate from next(), which cancels the remaining parts.
            while let (name, apply) = try await group.next() {
                if let apply { apply(&answer) } else { missing.append(name) }
            }
        }
        let order = parts.map(\.name)
        missing.sort { order.firstIndex(of: $0)! < order.firstIndex(of: $1)! }
        return (answer, missing)
    }

    /// Runs a non-essential part for at most `timeout`; nil when it fails or is late.
    private static func optional(
        _ fetch: @escaping @Sendable () async throws -> @Sendable (inout Answer) -> Void,
        timeout: Duration
    ) async -> (@Sendable (inout Answer) -> Void)? {
        await withinDeadline(timeout, fetch)
    }
}

/// The result of `body`, or nil when it throws or takes longer than `timeout` (it is then cancelled, which
/// resets its downstream streams). What every non-essential part of a fan-out runs under.
func withinDeadline<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { try? await body() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
