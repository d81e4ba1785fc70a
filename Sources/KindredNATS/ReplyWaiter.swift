import NIOConcurrencyHelpers

/// The answers awaited on one request token: complete at `count` messages, at a status message (when
/// `endsOnStatus`; a 503 always ends it), at the timeout (`finish(nil)`: what arrived) or on an error.
final class ReplyWaiter: Sendable {
    private struct State {
        var messages: [NATSMessage] = []
        var result: Result<[NATSMessage], any Error>?
        var continuation: CheckedContinuation<[NATSMessage], any Error>?
    }

    private let count: Int
    private let endsOnStatus: Bool
    private let state = NIOLockedValueBox(State())

    init(count: Int, endsOnStatus: Bool) {
        self.count = count
        self.endsOnStatus = endsOnStatus
    }

    /// Adds an answer; true when the waiter is now complete. A 503 is kept (the caller throws on it); other
    /// statuses are kept only when they do not end the wait (a plain request's answer).
    func add(_ message: NATSMessage) -> Bool {
        if message.status == 100 { return false }  // an idle heartbeat
        let complete = self.state.withLockedValue { state -> Bool in
            guard state.result == nil else { return true }
            if let status = message.status, self.endsOnStatus || status == 503 {
                if status == 503 { state.messages.append(message) }
                return true
            }
            state.messages.append(message)
            return state.messages.count >= self.count
        }
        if complete { self.finish(nil) }
        return complete
    }

    /// Completes with `result`, or with the messages gathered when nil. Later calls do nothing.
    func finish(_ result: Result<[NATSMessage], any Error>?) {
        let continuation = self.state.withLockedValue { state -> CheckedContinuation<[NATSMessage], any Error>? in
            guard state.result == nil else { return nil }
            state.result = result ?? .success(state.messages)
            defer { state.continuation = nil }
            return state.continuation
        }
        if let continuation, let result = self.state.withLockedValue({ $0.result }) {
            continuation.resume(with: result)
        }
    }

    func value() async throws -> [NATSMessage] {
        try await withCheckedThrowingContinuation { continuation in
            let result = self.state.withLockedValue { state -> Result<[NATSMessage], any Error>? in
                if state.result == nil { state.continuation = continuation }
                return state.result
            }
            if let result { continuation.resume(with: result) }
        }
    }
}
