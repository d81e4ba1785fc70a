import KindredHTTP2
import NIOCore
import Testing

@testable import KindredGRPC

/// A server connection's limits without I/O: which frames are charged, when writers and handlers wait for the
/// connection's output and when they go on, and when the request-body timer is rescheduled.
@Suite struct ServerConnectionLimitsTests {
    typealias Limits = ServerConnectionLimits

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    static let stream = 256 << 10
    static let connection = 4 << 20

    static func limits(burst: Int = 1000, refillPerSecond: Int = 33) -> Limits {
        Limits(
            configuration: .init(
                streamHighWatermark: Self.stream,
                connectionHighWatermark: Self.connection,
                abuseBudget: .init(burst: burst, refillPerSecond: refillPerSecond)
            ),
            now: Self.t0
        )
    }

    // MARK: Abuse budget

    @Test func theBudgetClosesTheConnectionOnceExhausted() {
        var limits = Self.limits(burst: 3, refillPerSecond: 1)
        let decisions = (0..<4).map { _ in limits.charge(.emptyData, now: Self.t0) }
        #expect(decisions == [.withinBudget, .withinBudget, .withinBudget, .closeForAbuse])
        // The charge that exhausted it is owed: two seconds later (two tokens) the budget holds again.
        #expect(limits.charge(.emptyData, now: Self.t0 + .seconds(1)) == .closeForAbuse)
        #expect(limits.charge(.emptyData, now: Self.t0 + .seconds(3)) == .withinBudget)
    }

    @Test(arguments: [
        // Small WINDOW_UPDATEs the stream sent so far → the decision, with no DATA sent yet.
        (Int?.some(0), Limits.PeerEventDecision.freeForStream), (7, .freeForStream), (8, .charge), (nil, .charge),
    ])
    func aStreamsFirstSmallWindowUpdatesAreFree(sent: Int?, decision: Limits.PeerEventDecision) {
        var limits = Self.limits()
        #expect(limits.peerEvent(.smallWindowUpdate, streamSmallWindowUpdates: sent) == decision)
    }

    @Test func eachDataFrameSentBuysTwoFreeConnectionWindowUpdates() {
        var limits = Self.limits()
        limits.sentData()
        let decisions = (0..<3).map { _ in limits.peerEvent(.smallWindowUpdate, streamSmallWindowUpdates: nil) }
        #expect(decisions == [.free, .free, .charge])
        // Saved up to a cap: a peer cannot bank a flood by receiving a long download first.
        for _ in 0..<20_000 { limits.sentData() }
        #expect(limits.freeWindowUpdates == Limits.maxFreeWindowUpdates)
    }

    @Test(arguments: [HTTP2PeerEvent.emptyData, .settings, .streamReset, .priority, .invalidFrame])
    func otherEventsAreAlwaysCharged(event: HTTP2PeerEvent) {
        var limits = Self.limits()
        limits.sentData()
        #expect(limits.peerEvent(event, streamSmallWindowUpdates: 0) == .charge)
        #expect(limits.freeWindowUpdates == 2, "a charged event does not spend the free updates")
    }

    // MARK: Output watermarks

    @Test(arguments: [
        // Bytes queued on the stream, on the connection → what its writer does.
        (0, 0, Limits.WriterDecision.write), (Self.stream, Self.connection, .write),
        (Self.stream + 1, 0, .waitForStream), (0, Self.connection + 1, .waitForConnection),
        (Self.stream + 1, Self.connection + 1, .waitForConnection),
    ])
    func writersWaitOverEitherWatermark(stream: Int, connection: Int, decision: Limits.WriterDecision) {
        var limits = Self.limits()
        #expect(limits.writer(1, streamQueued: stream, connectionQueued: connection) == decision)
        #expect(limits.connectionBlockedWriters == (decision == .waitForConnection ? [1] : []))
    }

    @Test func connectionBlockedWritersGoOnOnceTheConnectionDrainedToHalf() {
        var limits = Self.limits()
        for streamID: Int32 in [1, 3, 5] {
            #expect(limits.writer(streamID, streamQueued: 0, connectionQueued: Self.connection + 1) == .waitForConnection)
        }
        #expect(limits.takeConnectionBlockedWriters(connectionQueued: Self.connection / 2 + 1).isEmpty)
        #expect(limits.connectionBlockedWriters == [1, 3, 5], "still waiting above half the watermark")
        limits.streamClosed(3)
        #expect(limits.takeConnectionBlockedWriters(connectionQueued: Self.connection / 2) == [1, 5])
        #expect(limits.connectionBlockedWriters.isEmpty)
    }

    @Test func aDrainedStreamsWriterWaitsForTheConnectionIfItIsStillFull() {
        var limits = Self.limits()
        #expect(!limits.streamDrained(streamQueued: Self.stream / 2 + 1))
        #expect(limits.streamDrained(streamQueued: Self.stream / 2))
        #expect(limits.writerMayResume(7, connectionQueued: Self.connection + 1) == false)
        #expect(limits.connectionBlockedWriters == [7])
        #expect(limits.writerMayResume(7, connectionQueued: Self.connection) == true)
        #expect(limits.connectionBlockedWriters.isEmpty)
        #expect(limits.streamHasRoom(streamQueued: Self.stream))
        #expect(!limits.streamHasRoom(streamQueued: Self.stream + 1))
    }

    // MARK: Handler admission

    @Test func handlersWaitWhileTheConnectionIsFullAndWakeInOrder() {
        var limits = Self.limits()
        #expect(limits.handlerMayStart(1, connectionQueued: 0) == true)
        #expect(limits.handlerMayStart(3, connectionQueued: Self.connection) == false)
        #expect(limits.handlerMayStart(5, connectionQueued: Self.connection) == false)
        #expect(limits.handlersToWake(connectionQueued: Self.connection / 2 + 1).isEmpty)
        #expect(limits.handlersToWake(connectionQueued: Self.connection / 2) == [3, 5])
        // 5 may not overtake 3; a cancelled call leaves the line, a closed stream too.
        #expect(limits.handlerMayStart(5, connectionQueued: 0) == false)
        limits.callCancelled(3)
        #expect(limits.handlerMayStart(5, connectionQueued: 0) == true)
        #expect(limits.handlerMayStart(9, connectionQueued: Self.connection) == false)
        limits.streamClosed(9)
        #expect(limits.handlersToWake(connectionQueued: 0).isEmpty)
    }

    // MARK: Request-body timer

    @Test func theBodyTimerIsRescheduledOnlyForAnEarlierDeadline() {
        var limits = Self.limits()
        #expect(limits.watchBody(until: Self.t0 + .seconds(30)) == true)
        #expect(limits.watchBody(until: Self.t0 + .seconds(40)) == false, "a later deadline is caught by the armed timer")
        #expect(limits.watchBody(until: Self.t0 + .seconds(30)) == false)
        #expect(limits.watchBody(until: Self.t0 + .seconds(10)) == true)
        #expect(limits.bodyTimerDeadline == Self.t0 + .seconds(10))
        limits.bodyTimerFired()
        #expect(limits.bodyTimerDeadline == nil)
        #expect(limits.watchBody(until: Self.t0 + .seconds(40)) == true, "after it fired, the next deadline arms it again")
    }
}
