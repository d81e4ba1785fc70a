import NIOCore
import Testing

@testable import KindredGRPC

/// One call's lifecycle without I/O: the orders a call can take, and the ones it refuses.
@Suite struct ServerCallStateTests {
    @Test func unaryInOrder() {
        var state = ServerCallState()
        #expect(state.requestEnd() == true)
        #expect(state.startHandler() == true)
        #expect(state.sendMessage() == .sendHeadersAndMessage)
        #expect(state.finish() == .sendTrailers)
        #expect(state.isFinished && !state.isCancelled)
        #expect(state.handlerReturned() == false, "the stream is still open")
        #expect(state.streamClosed() == .init(cancel: false, releaseConnection: true))
    }

    @Test func streamClosesBeforeTheHandlerReturns() {
        var state = ServerCallState()
        _ = state.requestEnd()
        _ = state.startHandler()
        _ = state.sendMessage()
        _ = state.finish()
        #expect(state.streamClosed() == .init(cancel: false, releaseConnection: false), "the handler still runs")
        #expect(state.handlerReturned() == true, "now both sides are over")
    }

    @Test func errorWithoutMessageIsTrailersOnly() {
        var state = ServerCallState()
        #expect(state.finish() == .sendTrailersOnly)
        #expect(state.sendMessage() == .drop, "nothing after the status")
        #expect(state.finish() == .alreadyFinished, "one status per call")
    }

    @Test func streamingMessagesThenStatus() {
        var state = ServerCallState()
        #expect(state.startHandler() == true)
        #expect(state.startHandler() == false, "a handler starts once")
        #expect(state.sendMessage() == .sendHeadersAndMessage)
        #expect(state.sendMessage() == .sendMessage)
        #expect(state.sendMessage() == .sendMessage)
        #expect(state.finish() == .sendTrailers)
        #expect(state.sendMessage() == .drop)
    }

    @Test func duplicateEndOfRequestIsIgnored() {
        var state = ServerCallState()
        #expect(!state.requestEnded)
        #expect(state.requestEnd() == true)
        #expect(state.requestEnd() == false)
        #expect(state.requestEnded)
    }

    @Test func clientResetCancelsAnUnfinishedCall() {
        var state = ServerCallState()
        _ = state.startHandler()
        _ = state.sendMessage()
        #expect(state.streamClosed() == .init(cancel: true, releaseConnection: false))
        #expect(state.cancel() == .cancelUnfinished, "no status was sent: it ends CANCELLED")
        #expect(state.finish() == .alreadyFinished, "the handler's late status is dropped")
        #expect(state.sendMessage() == .drop)
        #expect(state.handlerReturned() == true)
    }

    @Test func statusRecordedButNotSentOnAClosedStream() {
        var state = ServerCallState()
        _ = state.startHandler()
        // Closed as the handler was about to answer (e.g. the connection went away).
        _ = state.streamClosed()
        #expect(state.finish() == .record)
    }

    @Test func deadlineFinishesThenCancels() {
        var state = ServerCallState()
        _ = state.startHandler()
        #expect(state.finish() == .sendTrailersOnly)
        #expect(state.cancel() == .cancel, "the status is out; only the handler is stopped")
        #expect(state.isCancelled && state.isFinished)
        #expect(state.cancel() == .alreadyCancelled)
        #expect(state.streamClosed() == .init(cancel: false, releaseConnection: false))
        #expect(state.streamClosed() == .init(cancel: false, releaseConnection: false), "closed once")
    }

    @Test func callWithoutHandlerReleasesOnClose() {
        // A unary call whose request never completed: no handler ran.
        var state = ServerCallState()
        #expect(state.streamClosed() == .init(cancel: true, releaseConnection: true))
        #expect(state.cancel() == .cancelUnfinished)
    }

    @Test(arguments: [
        (ServerCallState.Response.pending, ServerCallState.OnSend.sendHeadersAndMessage),
        (.streaming, .sendMessage),
        (.finished, .drop),
        (.cancelled, .drop),
    ])
    func sendInEveryResponsePhase(phase: ServerCallState.Response, expected: ServerCallState.OnSend) {
        var state = Self.state(in: phase)
        #expect(state.response == phase)
        #expect(state.sendMessage() == expected)
    }

    @Test(arguments: [
        (ServerCallState.Response.pending, ServerCallState.OnFinish.sendTrailersOnly, ServerCallState.OnCancel.cancelUnfinished),
        (.streaming, .sendTrailers, .cancelUnfinished),
        (.finished, .alreadyFinished, .cancel),
        (.cancelled, .alreadyFinished, .alreadyCancelled),
    ])
    func finishAndCancelInEveryResponsePhase(
        phase: ServerCallState.Response,
        finish: ServerCallState.OnFinish,
        cancel: ServerCallState.OnCancel
    ) {
        var finishing = Self.state(in: phase)
        #expect(finishing.finish() == finish)
        var cancelling = Self.state(in: phase)
        #expect(cancelling.cancel() == cancel)
    }

    private static func state(in phase: ServerCallState.Response) -> ServerCallState {
        var state = ServerCallState()
        switch phase {
        case .pending: break
        case .streaming: _ = state.sendMessage()
        case .finished: _ = state.finish()
        case .cancelled: _ = state.cancel()
        }
        return state
    }
}

/// Flow-control accounting of received messages: which bytes go back to the window when.
@Suite struct InboundMessagesTests {
    static func framed(_ size: Int) -> [UInt8] {
        [0, UInt8(size >> 24 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)]
            + Array(repeating: 7, count: size)
    }

    /// Feeds `wire` in chunks; returns the bytes released at once, and the messages' sizes with what each held.
    /// Yields now and then: megabytes in small chunks are seconds of work in a debug build, which would hold a
    /// thread of the cooperative pool the whole parallel run shares.
    static func feed(_ wire: [UInt8], chunk: Int, into inbound: inout InboundMessages) async throws -> Int {
        var released = 0
        var offset = 0
        var fed = 0
        while offset < wire.count {
            fed += 1
            if fed % 4096 == 0 { await Task.yield() }
            let end = min(offset + chunk, wire.count)
            released += try wire[offset..<end].withUnsafeBytes { try inbound.receive($0, allocator: ByteBufferAllocator()) }
            offset = end
        }
        return released
    }

    @Test(arguments: [1, 7, 16_384, 100_000, 2_000_000])
    func everyByteGoesBackExactlyOnce(chunk: Int) async throws {
        // Two ~1 MB messages and a small one: the sizes that stalled at a 1 MiB window. A byte at a time, messages
        // past the 64 KiB default window instead (two megabytes of one-byte calls are a minute of a debug build).
        let sizes = chunk == 1 ? [100_000, 100_000, 10] : [1_000_000, 1_000_000, 10]
        let wire = sizes.flatMap(Self.framed)
        var inbound = InboundMessages(maxMessageSize: 4 << 20)
        var released = try await Self.feed(wire, chunk: chunk, into: &inbound)
        #expect(inbound.count == 3)
        #expect(released + inbound.heldBytes == wire.count)
        while !inbound.isEmpty {
            let (message, held) = inbound.removeFirst()
            #expect(held >= 0 && held <= message.readableBytes + MessageFraming.headerSize)
            #expect(inbound.heldBytes <= inbound.queuedBytes)
            released += held
        }
        #expect(released == wire.count, "released \(released) of \(wire.count) bytes")
        #expect(inbound.heldBytes == 0)
    }

    @Test func partialBytesNeverHoldTheWindow() throws {
        // A 1 MB message received 16 KiB at a time: each chunk of the unfinished message goes back at once, so
        // a 1 MiB window never fills. Only the chunk that completes it is held until it is read.
        var inbound = InboundMessages(maxMessageSize: 4 << 20)
        let wire = Self.framed(1_000_000) + Self.framed(1_000_000)
        var released = 0
        var offset = 0
        var maxHeld = 0
        while offset < wire.count {
            let end = min(offset + 16_384, wire.count)
            released += try wire[offset..<end].withUnsafeBytes { try inbound.receive($0, allocator: ByteBufferAllocator()) }
            maxHeld = max(maxHeld, inbound.heldBytes)
            if inbound.count == 1 {
                // The handler reads the first message while the second arrives.
                released += inbound.removeFirst().release
            }
            offset = end
        }
        #expect(maxHeld <= 16_384)
        #expect(released + inbound.heldBytes == wire.count)
    }

    @Test func aReaderThatStopsHoldsTheWindow() async throws {
        // Three 64 KiB messages in 16 KiB frames, none read: after the first completes, the bytes of the next ones
        // stay held (up to the queued size), so the sender's window closes.
        var inbound = InboundMessages(maxMessageSize: 1 << 20)
        let size = (64 << 10) + 5
        let wire = Array(repeating: Self.framed(64 << 10), count: 3).flatMap { $0 }
        let released = try await Self.feed(wire, chunk: 16_384, into: &inbound)
        #expect(inbound.count == 3)
        #expect(inbound.heldBytes >= 2 * size)
        #expect(released == 4 * 16_384, "only the first message's four partial frames went back")
        #expect(released + inbound.heldBytes == wire.count)
    }

    @Test func unreadMessagesHoldTheirBytes() async throws {
        var inbound = InboundMessages(maxMessageSize: 1 << 20)
        let wire = Self.framed(100) + Self.framed(200)
        #expect(try await Self.feed(wire, chunk: wire.count, into: &inbound) == 0)
        #expect(inbound.heldBytes == 105 + 205)
        #expect(inbound.removeAll() == 310)
        #expect(inbound.heldBytes == 0 && inbound.isEmpty)
    }

    @Test func framingErrorReleasesEverything() async throws {
        var inbound = InboundMessages(maxMessageSize: 1000)
        let first = Self.framed(100)
        #expect(try await Self.feed(first, chunk: first.count, into: &inbound) == 0)
        let bad = Self.framed(5000)
        do {
            _ = try bad.withUnsafeBytes { try inbound.receive($0, allocator: ByteBufferAllocator()) }
            Issue.record("an oversized message was accepted")
        } catch let error as InboundMessages.ReceiveFailure {
            #expect(error.failure == .messageTooLarge(length: 5000, limit: 1000))
            #expect(error.release == first.count + bad.count)
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(inbound.isEmpty && inbound.heldBytes == 0)
    }
}
