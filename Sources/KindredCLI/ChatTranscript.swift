import KindredProto

/// What `kindred chat` prints of one thread, without I/O: every message once, in sequence order, with nothing lost
/// between the history and the live stream.
///
/// The command subscribes first and reads the history while the stream comes up, but it cannot tell when chat
/// registered the stream (nothing is sent until an event). A message committed after the history was read and
/// before the registration is on neither, so the transcript asks for a catch-up (History NEWER after the last
/// sequence printed) once the stream delivered its first event, whatever it is (heartbeats come in silence),
/// and whenever a message arrives past a gap in the thread's sequence (1, 2, 3... without gaps). Messages seen
/// twice (history, stream, catch-up, the answer to our own SendMessage) are printed once.
struct ChatTranscript {
    typealias Message = Kindred.Api.V1.ChatMessage

    /// What the command does next: print messages (oldest first), and maybe fetch the messages after a sequence
    /// and hand them to `caughtUp(_:)`.
    struct Step: Equatable {
        var print: [Message] = []
        var catchUpAfter: Int64?
    }

    /// The sequence of the last message printed; 0 before any.
    private(set) var lastSequence: Int64 = 0
    private var historyRead = false
    /// Messages seen before the history was read or past a gap, waiting to be printed in order.
    private var pending: [Int64: Message] = [:]
    private var streamLive = false
    private var catchingUp = false

    /// The history page (newest first, as History answers): printed oldest first, with what the stream brought
    /// meanwhile.
    mutating func history(_ newestFirst: [Message]) -> Step {
        self.historyRead = true
        var step = Step()
        for message in newestFirst.reversed() { self.append(message, to: &step) }
        self.flushPending(into: &step)
        if self.streamLive || !self.pending.isEmpty { self.requestCatchUp(&step) }
        return step
    }

    /// A message of the thread from the stream or the answer to SendMessage.
    mutating func received(_ message: Message) -> Step {
        var step = Step()
        guard message.sequence > self.lastSequence else { return step }
        self.pending[message.sequence] = message
        guard self.historyRead else { return step }
        self.flushPending(into: &step)
        if !self.pending.isEmpty { self.requestCatchUp(&step) }
        return step
    }

    /// The stream delivered an event (any kind): from now on it carries everything; catch up once on what came
    /// before it was registered.
    mutating func streamDeliveredEvent() -> Step {
        var step = Step()
        guard !self.streamLive else { return step }
        self.streamLive = true
        if self.historyRead { self.requestCatchUp(&step) }
        return step
    }

    /// The messages after `catchUpAfter` (oldest first), up to the newest at the time of the call: the server's
    /// word on what exists up to there, so sequences missing in it (erased messages) are not waited for. Messages
    /// seen past its end still need what lies between: another catch-up.
    mutating func caughtUp(_ oldestFirst: [Message]) -> Step {
        self.catchingUp = false
        var step = Step()
        let covered = oldestFirst.map(\.sequence).max() ?? self.lastSequence
        for message in oldestFirst where message.sequence > self.lastSequence {
            self.pending[message.sequence] = message
        }
        for sequence in self.pending.keys.sorted() where sequence <= covered {
            if let message = self.pending.removeValue(forKey: sequence) { self.append(message, to: &step) }
        }
        self.flushPending(into: &step)
        if !self.pending.isEmpty { self.requestCatchUp(&step) }
        return step
    }

    private mutating func append(_ message: Message, to step: inout Step) {
        guard message.sequence > self.lastSequence else { return }
        step.print.append(message)
        self.lastSequence = message.sequence
    }

    /// Prints the pending messages that follow the last one printed without a gap.
    private mutating func flushPending(into step: inout Step) {
        for sequence in self.pending.keys.sorted() where sequence <= self.lastSequence {
            self.pending[sequence] = nil
        }
        while let next = self.pending.removeValue(forKey: self.lastSequence + 1) {
            self.append(next, to: &step)
        }
    }

    private mutating func requestCatchUp(_ step: inout Step) {
        guard !self.catchingUp else { return }
        self.catchingUp = true
        step.catchUpAfter = self.lastSequence
    }
}
