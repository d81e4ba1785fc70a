import NIOCore
import Testing

@testable import KindredGRPC

/// The server connection's lifecycle without I/O: every phase change, every timer, and the events each phase
/// must ignore.
@Suite struct ServerConnectionStateMachineTests {
    typealias Machine = ServerConnectionStateMachine
    typealias Action = ServerConnectionStateMachine.Action

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func configuration(
        idle: TimeAmount? = .seconds(300),
        firstRequest: TimeAmount? = .seconds(30),
        handshake: TimeAmount? = .seconds(10),
        maxAge: TimeAmount? = nil,
        permitPingWithoutCalls: Bool = false
    ) -> Machine.Configuration {
        Machine.Configuration(
            idleTimeout: idle,
            firstRequestTimeout: firstRequest,
            handshakeTimeout: handshake,
            maxAge: maxAge,
            maxAgeGrace: .seconds(30),
            keepaliveTime: .seconds(7200),
            keepaliveTimeout: .seconds(20),
            minPingInterval: .seconds(300),
            permitPingWithoutCalls: permitPingWithoutCalls,
            maxPingStrikes: 2,
            shutdownPingTimeout: .seconds(1)
        )
    }

    /// A started machine with the handshake done.
    static func active(_ configuration: Machine.Configuration = configuration()) -> Machine {
        var machine = Machine(configuration: configuration, now: t0)
        _ = machine.start(now: t0)
        _ = machine.receivedSettings()
        return machine
    }

    // MARK: Start, handshake, idle

    @Test func startArmsHandshakeFirstRequestMaxAgeAndKeepalive() {
        var machine = Machine(configuration: Self.configuration(maxAge: .seconds(60)), now: Self.t0)
        #expect(machine.phase == .notStarted)
        #expect(!machine.acceptsCalls)
        #expect(
            machine.start(now: Self.t0) == [
                .schedule(.handshake, .seconds(10)), .schedule(.idle, .seconds(30)), .schedule(.maxAge, .seconds(60)),
                .schedule(.keepalive, .seconds(7200)),
            ]
        )
        #expect(machine.phase == .active)
        #expect(machine.start(now: Self.t0) == [], "a second start does nothing")
    }

    @Test(arguments: [
        (TimeAmount?.some(.seconds(300)), TimeAmount?.some(.seconds(30)), TimeAmount?.some(.seconds(30))),
        (.seconds(10), .seconds(30), .seconds(10)),
        (nil, .seconds(30), .seconds(30)),
        (.seconds(300), nil, .seconds(300)),
        (nil, nil, nil),
    ])
    func firstIdleTimerIsTheShorterOfIdleAndFirstRequest(idle: TimeAmount?, first: TimeAmount?, expected: TimeAmount?) {
        var machine = Machine(configuration: Self.configuration(idle: idle, firstRequest: first, handshake: nil), now: Self.t0)
        let actions = machine.start(now: Self.t0)
        #expect(actions.contains(.schedule(.idle, expected ?? .zero)) == (expected != nil))
        #expect(machine.isArmed(.idle) == (expected != nil))
    }

    @Test func handshakeTimeoutClosesUnlessSettingsArrived() {
        var late = Machine(configuration: Self.configuration(), now: Self.t0)
        _ = late.start(now: Self.t0)
        #expect(late.timerFired(.handshake, now: Self.t0 + .seconds(10)) == [.timedOut(.handshake), .close])
        #expect(late.phase == .closed)

        var prompt = Machine(configuration: Self.configuration(), now: Self.t0)
        _ = prompt.start(now: Self.t0)
        #expect(prompt.receivedSettings() == .cancel(.handshake))
        #expect(prompt.handshakeComplete)
        #expect(prompt.receivedSettings() == nil, "later SETTINGS are the handler's to charge")
        #expect(prompt.timerFired(.handshake, now: Self.t0 + .seconds(10)) == [], "a cancelled timer firing late")
        #expect(prompt.phase == .active)
    }

    @Test func firstRequestTimeoutCountsAsSuch() {
        var machine = Self.active()
        #expect(
            machine.timerFired(.idle, now: Self.t0 + .seconds(30)) == [
                .timedOut(.firstRequest), .sendGoAway(.noError, debugData: "idle"), .close,
            ]
        )
        #expect(machine.phase == .closed)
        #expect(!machine.acceptsCalls)
    }

    @Test func aRequestThatIsNoCallStillEndsTheFirstRequestTimeout() {
        // An unknown method is answered without becoming a call: the connection is in use all the same.
        var machine = Self.active()
        #expect(machine.requestReceived() == .schedule(.idle, .seconds(300)))
        #expect(machine.requestReceived() == nil)
        #expect(
            machine.timerFired(.idle, now: Self.t0 + .seconds(300)) == [.sendGoAway(.noError, debugData: "idle"), .close],
            "an idle timeout, not a first-request one"
        )

        var noIdleTimeout = Self.active(Self.configuration(idle: nil))
        #expect(noIdleTimeout.requestReceived() == .cancel(.idle))
    }

    @Test func idleTimerFollowsTheCalls() {
        var machine = Self.active()
        #expect(machine.callOpened() == .cancel(.idle))
        #expect(machine.callOpened() == nil, "the idle timer is cancelled once")
        #expect(machine.openCalls == 2)
        #expect(machine.callClosed() == nil)
        #expect(machine.callClosed() == .schedule(.idle, .seconds(300)), "after a request, the general idle timeout")
        #expect(
            machine.timerFired(.idle, now: Self.t0 + .seconds(400)) == [.sendGoAway(.noError, debugData: "idle"), .close]
        )
        #expect(machine.phase == .closed)
    }

    @Test func idleTimerFiringWhileACallIsOpenIsIgnored() {
        var machine = Self.active()
        _ = machine.callOpened()
        // Fired as it was being cancelled: the machine no longer counts it armed.
        #expect(machine.timerFired(.idle, now: Self.t0 + .seconds(30)) == [])
        #expect(machine.phase == .active)
    }

    // MARK: Two-phase graceful shutdown

    @Test func shutdownWaitsForThePingAckBeforeTheFinalGoAway() {
        var machine = Self.active()
        _ = machine.callOpened()
        #expect(
            machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0) == [
                .sendShutdownNotice, .sendPing(Machine.shutdownPing), .schedule(.shutdownPing, .seconds(1)),
                .schedule(.grace, .seconds(5)),
            ]
        )
        #expect(machine.phase == .quiescing)
        // A stream the client opened before it saw the first GOAWAY is still a call.
        #expect(machine.acceptsCalls)
        #expect(machine.callOpened() == nil)
        #expect(machine.callClosed() == nil)
        #expect(machine.callClosed() == nil, "no calls, but the PING is out: the client may have sent one more")
        #expect(!machine.isDrained)
        #expect(machine.receivedPingAck(Machine.keepalivePing) == [], "another PING's ACK is not the one")
        #expect(
            machine.receivedPingAck(Machine.shutdownPing) == [
                .cancel(.shutdownPing), .sendGoAway(.noError, debugData: ""), .closeWhenDrained,
            ]
        )
        #expect(machine.phase == .closing)
        #expect(machine.isDrained)
        #expect(machine.receivedPingAck(Machine.shutdownPing) == [], "a repeated ACK does nothing")
    }

    @Test func finalGoAwayWithCallsLeftClosesWithTheLastOne() {
        var machine = Self.active()
        _ = machine.callOpened()
        _ = machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0)
        #expect(machine.receivedPingAck(Machine.shutdownPing) == [.cancel(.shutdownPing), .sendGoAway(.noError, debugData: "")])
        #expect(!machine.isDrained)
        #expect(machine.callClosed() == .closeWhenDrained)
        #expect(machine.isDrained)
    }

    @Test func unansweredShutdownPingTimesOutIntoTheFinalGoAway() {
        var machine = Self.active()
        _ = machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0)
        #expect(
            machine.timerFired(.shutdownPing, now: Self.t0 + .seconds(1)) == [
                .sendGoAway(.noError, debugData: ""), .closeWhenDrained,
            ]
        )
        #expect(machine.phase == .closing)
    }

    @Test func shortGraceBoundsThePingWait() {
        var machine = Self.active()
        let actions = machine.beginGracefulShutdown(grace: .milliseconds(200), now: Self.t0)
        #expect(actions.contains(.schedule(.shutdownPing, .milliseconds(200))))
    }

    @Test func graceEndFailsWhatIsLeft() {
        var quiescing = Self.active()
        _ = quiescing.callOpened()
        _ = quiescing.beginGracefulShutdown(grace: .seconds(5), now: Self.t0)
        #expect(
            quiescing.timerFired(.grace, now: Self.t0 + .seconds(5)) == [
                .sendGoAway(.noError, debugData: ""), .cancel(.shutdownPing), .failCalls(.shutdown), .close,
            ]
        )
        #expect(quiescing.phase == .closed)

        var closing = Self.active()
        _ = closing.callOpened()
        _ = closing.beginGracefulShutdown(grace: .seconds(5), now: Self.t0)
        _ = closing.receivedPingAck(Machine.shutdownPing)
        #expect(closing.timerFired(.grace, now: Self.t0 + .seconds(5)) == [.failCalls(.shutdown), .close])
        #expect(closing.phase == .closed)
    }

    @Test func aSecondShutdownCanOnlyShortenTheGrace() {
        var machine = Self.active()
        _ = machine.beginGracefulShutdown(grace: .seconds(30), now: Self.t0)
        #expect(machine.beginGracefulShutdown(grace: .seconds(60), now: Self.t0) == [])
        #expect(
            machine.beginGracefulShutdown(grace: .seconds(2), now: Self.t0 + .seconds(1)) == [
                .cancel(.grace), .schedule(.grace, .seconds(2)),
            ]
        )
        #expect(machine.phase == .quiescing)
    }

    @Test func maxAgeStartsTheSameTwoPhaseShutdownWithItsGrace() {
        var machine = Self.active(Self.configuration(maxAge: .seconds(60)))
        #expect(
            machine.timerFired(.maxAge, now: Self.t0 + .seconds(60)) == [
                .sendShutdownNotice, .sendPing(Machine.shutdownPing), .schedule(.shutdownPing, .seconds(1)),
                .schedule(.grace, .seconds(30)),
            ]
        )
        #expect(machine.phase == .quiescing)
        // The calls left when its grace ends are told the connection was replaced, not that the server stops.
        _ = machine.callOpened()
        #expect(
            machine.timerFired(.grace, now: Self.t0 + .seconds(90)) == [
                .sendGoAway(.noError, debugData: ""), .cancel(.shutdownPing), .failCalls(.maxAge), .close,
            ])
        #expect(Machine.DrainCause.maxAge.message == "The connection reached its maximum age; reconnect")
    }

    @Test func aServerShutdownDuringAMaxAgeDrainIsWhatTheCallsAreTold() {
        var machine = Self.active(Self.configuration(maxAge: .seconds(60)))
        _ = machine.callOpened()
        _ = machine.timerFired(.maxAge, now: Self.t0 + .seconds(60))
        _ = machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0 + .seconds(61))
        #expect(machine.timerFired(.grace, now: Self.t0 + .seconds(66)).contains(.failCalls(.shutdown)))
    }

    @Test func clientGoAwayDrains() {
        var idle = Self.active()
        #expect(idle.receivedGoAway() == [.closeWhenDrained])
        #expect(idle.phase == .closing)

        var busy = Self.active()
        _ = busy.callOpened()
        _ = busy.beginGracefulShutdown(grace: .seconds(5), now: Self.t0)
        #expect(busy.receivedGoAway() == [.cancel(.shutdownPing)])
        #expect(busy.callClosed() == .closeWhenDrained)
    }

    @Test func shutdownBeforeStartJustCloses() {
        var machine = Machine(configuration: Self.configuration(), now: Self.t0)
        #expect(machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0) == [.close])
        #expect(machine.phase == .notStarted)
    }

    // MARK: Keepalive and PING strikes

    @Test func keepalivePingsASilentClientAndClosesWithoutAnAnswer() {
        var machine = Self.active()
        #expect(machine.isArmed(.keepalive))
        let due = Self.t0 + .seconds(7200)
        #expect(
            machine.timerFired(.keepalive, now: due) == [
                .sendPing(Machine.keepalivePing), .schedule(.keepaliveTimeout, .seconds(20)),
                .schedule(.keepalive, .seconds(7200)),
            ]
        )
        #expect(machine.timerFired(.keepaliveTimeout, now: due + .seconds(20)) == [.close])
        #expect(machine.phase == .closed)
    }

    @Test func anyInputAnswersTheKeepalive() {
        var byAck = Self.active()
        _ = byAck.timerFired(.keepalive, now: Self.t0 + .seconds(7200))
        #expect(byAck.receivedPingAck(Machine.keepalivePing) == [.cancel(.keepaliveTimeout)])

        var byBytes = Self.active()
        _ = byBytes.timerFired(.keepalive, now: Self.t0 + .seconds(7200))
        #expect(byBytes.received(now: Self.t0 + .seconds(7201)) == .cancel(.keepaliveTimeout))
        #expect(byBytes.received(now: Self.t0 + .seconds(7202)) == nil)
        #expect(byBytes.phase == .active)
    }

    @Test func keepaliveSkipsAClientHeardFromRecently() {
        var machine = Self.active()
        _ = machine.received(now: Self.t0 + .seconds(7000))
        #expect(machine.timerFired(.keepalive, now: Self.t0 + .seconds(7200)) == [.schedule(.keepalive, .seconds(7200))])
    }

    @Test(arguments: [
        // (permit without calls, a call open, seconds between PINGs, PINGs, abusive after the last)
        (false, false, 1000, 3, true),  // every PING without a call is a strike
        (false, false, 1000, 2, false),
        (true, false, 1000, 10, false),  // permitted and far apart
        (true, false, 10, 3, false),  // the first PING is never early
        (true, false, 10, 4, true),
        (false, true, 10, 4, true),  // too frequent, even during a call
        (false, true, 301, 10, false),
    ])
    func pingStrikes(permit: Bool, withCall: Bool, interval: Int64, pings: Int, abusive: Bool) {
        var machine = Self.active(Self.configuration(permitPingWithoutCalls: permit))
        if withCall { _ = machine.callOpened() }
        var result = false
        for i in 0..<pings {
            result = machine.receivedPing(now: Self.t0 + .seconds(Int64(i) * interval))
        }
        #expect(result == abusive)
    }

    @Test func requestsAndSentDataResetTheStrikes() {
        var machine = Self.active()
        _ = machine.receivedPing(now: Self.t0)
        _ = machine.receivedPing(now: Self.t0)
        #expect(machine.pingStrikes == 2)
        machine.sentData()
        #expect(machine.pingStrikes == 0)
        _ = machine.receivedPing(now: Self.t0)
        _ = machine.callOpened()
        #expect(machine.pingStrikes == 0)
    }

    // MARK: Abuse and teardown

    @Test func abuseClosesOnce() {
        var machine = Self.active()
        #expect(machine.closeForAbuse() == true)
        #expect(machine.phase == .closed)
        #expect(machine.closeForAbuse() == false, "penalised once")
        #expect(machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0) == [])
        #expect(machine.isDrained)
    }

    @Test func channelClosedCancelsEveryArmedTimer() {
        var machine = Self.active(Self.configuration(maxAge: .seconds(60)))
        _ = machine.beginGracefulShutdown(grace: .seconds(5), now: Self.t0)
        let actions = machine.channelClosed()
        let cancelled = actions.compactMap { action -> Machine.Timer? in
            if case .cancel(let timer) = action { return timer }
            return nil
        }
        #expect(cancelled.count == actions.count)
        #expect(Set(cancelled) == [.idle, .maxAge, .keepalive, .shutdownPing, .grace])
        for timer in Machine.Timer.allCases { #expect(!machine.isArmed(timer)) }
        #expect(machine.phase == .closed)
        for timer in Machine.Timer.allCases {
            #expect(machine.timerFired(timer, now: Self.t0 + .seconds(10_000)) == [], "\(timer) after close")
        }
    }

    @Test func closedIgnoresEverything() {
        var machine = Self.active()
        machine.closeNow()
        #expect(!machine.acceptsCalls)
        #expect(machine.receivedGoAway() == [])
        #expect(machine.receivedPingAck(Machine.shutdownPing) == [])
        #expect(machine.beginGracefulShutdown(grace: .seconds(1), now: Self.t0) == [])
        #expect(machine.timerFired(.keepalive, now: Self.t0 + .seconds(7200)) == [])
    }
}
