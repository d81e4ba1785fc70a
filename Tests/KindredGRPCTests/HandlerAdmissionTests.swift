import NIOCore
import Testing

@testable import KindredGRPC

@Suite struct HandlerAdmissionTests {
    static let cap = 4 << 20

    /// Asks for each (stream, queued output) in turn; returns the answers.
    static func ask(_ admission: inout HandlerAdmission, _ questions: [(Int32, Int)]) -> [Bool] {
        questions.map { admission.mayStart($0.0, queuedOutput: $0.1) }
    }

    @Test(arguments: [
        // Queued output → may a new handler start (nothing waiting)?
        (0, true), (Self.cap - 1, true), (Self.cap, false), (Self.cap + 5, false),
    ])
    func startsOnlyUnderTheCap(queued: Int, starts: Bool) {
        var admission = HandlerAdmission(cap: Self.cap)
        #expect(Self.ask(&admission, [(1, queued)]) == [starts])
        #expect(admission.waiting == (starts ? [] : [1]))
    }

    @Test func waitingCallsStartInOrderOnceDrained() {
        var admission = HandlerAdmission(cap: Self.cap)
        // Asking again does not queue twice; a newcomer waits behind the others even under the cap.
        let first = Self.ask(&admission, [(1, Self.cap), (3, Self.cap), (5, Self.cap), (3, Self.cap), (7, 0)])
        #expect(first == [false, false, false, false, false])
        #expect(admission.waiting == [1, 3, 5, 7])
        // Drained below the cap but not to half: nobody is woken.
        #expect(!admission.shouldWake(queuedOutput: Self.cap / 2 + 1))
        #expect(admission.shouldWake(queuedOutput: Self.cap / 2))
        // Woken, they ask again: 3 may not overtake 1; then 3 queues a large message and 5 and 7 wait again.
        let second = Self.ask(&admission, [(3, 0), (1, 0), (3, 0), (5, Self.cap), (7, Self.cap)])
        #expect(second == [false, true, true, false, false])
        #expect(admission.waiting == [5, 7])
    }

    @Test func anEndedCallLeavesTheQueue() {
        var admission = HandlerAdmission(cap: Self.cap)
        #expect(Self.ask(&admission, [(1, Self.cap), (3, Self.cap)]) == [false, false])
        admission.remove(1)
        // 3 is first now and is not held up by the call that went away.
        #expect(Self.ask(&admission, [(3, 0)]) == [true])
        #expect(admission.waiting.isEmpty)
        #expect(!admission.shouldWake(queuedOutput: 0))
    }
}

@Suite struct AbuseTarpitTests {
    static let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// Decisions for connections whose address is penalised until each of `until` in turn.
    static func admit(_ tarpit: inout AbuseTarpit, _ until: [NIODeadline?]) -> [AbuseTarpit.Decision] {
        until.map { tarpit.admit(blockedUntil: $0, now: Self.now) }
    }

    @Test func holdsPenalisedConnectionsUntilThePenaltyEnds() {
        var tarpit = AbuseTarpit()
        let decisions = Self.admit(&tarpit, [nil, Self.now, Self.now + .seconds(2)])
        #expect(decisions == [.accept, .accept, .hold(until: Self.now + .seconds(2))])
        #expect(tarpit.held == 1)
        tarpit.release()
        #expect(tarpit.held == 0)
    }

    @Test func holdIsBounded() {
        var configuration = AbuseTarpit.Configuration()
        configuration.maxHold = .seconds(5)
        var tarpit = AbuseTarpit(configuration: configuration)
        #expect(Self.admit(&tarpit, [Self.now + .seconds(60)]) == [.hold(until: Self.now + .seconds(5))])
    }

    @Test func refusesBeyondCapacity() {
        var configuration = AbuseTarpit.Configuration()
        configuration.capacity = 2
        var tarpit = AbuseTarpit(configuration: configuration)
        let until = Self.now + .seconds(1)
        #expect(Self.admit(&tarpit, [until, until, until]) == [.hold(until: until), .hold(until: until), .refuse])
        tarpit.release()
        #expect(Self.admit(&tarpit, [until]) == [.hold(until: until)])
    }
}
