import KindredGRPC
import KindredProto

/// `kindred.api.v1.ChatService`: threads, messages, receipts, typing and the live event stream, served by the
/// chat service. The caller's token goes along; chat checks that the ids named belong to the caller.
struct ChatAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias M = Api.ChatService.Method
        typealias C = ChatApi.ChatService.Method
        let gateway = self.gateway

        router.unary(M.listThreads) { request, context in
            let caller = try await gateway.admit(context, .user)
            let chat = try gateway.requireChat()
            var forwarded = ChatApi.ListThreadsRequest()
            forwarded.pageSize = request.pageSize
            forwarded.pageToken = request.pageToken
            let response = try await chat.call(C.listThreads, forwarded, as: caller)
            var answer = Api.ListThreadsResponse()
            answer.threads = response.threads.map(Api.ChatThread.init)
            answer.nextPageToken = response.nextPageToken
            // Cards come from the profile service, which this gateway does not call yet.
            if !answer.threads.isEmpty {
                answer.unavailableParts = ["profiles"]
                gateway.metrics.partMissing("chat.profiles")
            }
            return answer
        }
        router.unary(M.sendMessage) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ChatApi.SendMessageRequest()
            forwarded.threadId = request.threadId
            forwarded.clientMessageId = request.clientMessageId
            forwarded.body = request.body
            let response = try await gateway.requireChat().call(C.sendMessage, forwarded, as: caller)
            var answer = Api.SendMessageResponse()
            answer.message = response.message.map(Api.ChatMessage.init)
            answer.replayed = response.replayed
            return answer
        }
        router.unary(M.history) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ChatApi.HistoryRequest()
            forwarded.threadId = request.threadId
            forwarded.pageSize = request.pageSize
            forwarded.pageToken = request.pageToken
            forwarded.direction = ChatApi.HistoryDirection(rawValue: request.direction.rawValue)
            forwarded.fromSequence = request.fromSequence
            let response = try await gateway.requireChat().call(C.history, forwarded, as: caller)
            var answer = Api.HistoryResponse()
            answer.messages = response.messages.map(Api.ChatMessage.init)
            answer.nextPageToken = response.nextPageToken
            return answer
        }
        router.unary(M.markRead) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ChatApi.MarkReadRequest()
            forwarded.threadId = request.threadId
            forwarded.upToMessageId = request.upToMessageId
            let response = try await gateway.requireChat().call(C.markRead, forwarded, as: caller)
            var answer = Api.MarkReadResponse()
            answer.unreadCount = response.unreadCount
            return answer
        }
        router.unary(M.markDelivered) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ChatApi.MarkDeliveredRequest()
            forwarded.threadId = request.threadId
            forwarded.upToMessageId = request.upToMessageId
            _ = try await gateway.requireChat().call(C.markDelivered, forwarded, as: caller)
            return Api.MarkDeliveredResponse()
        }
        router.unary(M.sendTyping) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ChatApi.SendTypingRequest()
            forwarded.threadId = request.threadId
            _ = try await gateway.requireChat().call(C.sendTyping, forwarded, as: caller)
            return Api.SendTypingResponse()
        }
        router.unary(M.getChatSettings) { _, context in
            let caller = try await gateway.admit(context, .user)
            let settings = try await gateway.requireChat().call(C.getChatSettings, .init(), as: caller)
            return Api.ChatSettings.with { $0.hideReadReceipts = settings.hideReadReceipts }
        }
        router.unary(M.updateChatSettings) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = ChatApi.UpdateChatSettingsRequest()
            forwarded.settings = .with { $0.hideReadReceipts = request.settings?.hideReadReceipts ?? false }
            let settings = try await gateway.requireChat().call(C.updateChatSettings, forwarded, as: caller)
            return Api.ChatSettings.with { $0.hideReadReceipts = settings.hideReadReceipts }
        }
        router.serverStreaming(M.subscribe) { request, writer, context in
            let caller = try await gateway.admit(context, .user)
            try await gateway.proxySubscribe(request, writer, caller)
        }
    }
}

extension Gateway {
    /// Subscribe, proxied as a server stream: each event is written before the next one is read from chat, so
    /// a client that reads slowly holds chat's stream back (HTTP/2 flow control end to end) until chat ends it
    /// with SUBSCRIBER_TOO_SLOW, which reaches the client unchanged, as does SERVER_DRAINING with one chat
    /// replica. No overall deadline beyond the client's own (capped at `streamMaxDuration`): chat's heartbeats keep
    /// it alive.
    ///
    /// With several chat replicas, a stream whose replica dies (its connection is lost), drains (SERVER_DRAINING)
    /// or is busy (UNAVAILABLE) is resumed from the last resume token written to the client, on a replica in
    /// rotation, at most `subscribeResumes` times in a row: the client's stream goes on with no gap and no
    /// duplicate. Without a token yet (a live-only stream that has delivered nothing resumable) the error reaches
    /// the client, which resumes as before.
    func proxySubscribe(
        _ request: Api.SubscribeRequest, _ writer: ResponseWriter<Api.SubscribeResponse>, _ caller: Caller
    ) async throws {
        guard let streams = self.chatStreams else { throw GatewayErrors.notDeployed("Chat") }
        let resumable = (self.configuration.chatAddress?.replicas.count ?? 1) > 1
        var forwarded = ChatApi.SubscribeRequest()
        forwarded.resumeToken = request.resumeToken
        var resumes = 0
        do {
            while true {
                var opened = false
                do {
                    try await streams.withClient(user: caller.userID ?? caller.clientAddress) { client in
                        try await client.serverStreaming(
                            ChatApi.ChatService.Method.subscribe, forwarded, metadata: caller.forwardedMetadata,
                            options: CallOptions(timeout: self.configuration.streamMaxDuration)
                        ) { stream in
                            opened = true
                            for try await response in stream {
                                guard let event = response.event else { continue }
                                try await writer.write(Api.SubscribeResponse(event, caller: caller.userID))
                                if !event.resumeToken.isEmpty {
                                    forwarded.resumeToken = event.resumeToken
                                    resumes = 0
                                }
                            }
                        }
                    }
                    break
                } catch let error as RPCError
                    where resumable && opened && resumes < Self.subscribeResumes && !forwarded.resumeToken.isEmpty
                    && Self.chatReplicaLost(error)
                {
                    // A draining replica may still be in rotation (health checks notice within seconds): the
                    // pause grows so that a resume lands elsewhere before the attempts run out.
                    try await Task.sleep(for: .milliseconds(min(1000, 50 << resumes)))
                    resumes += 1
                    self.metrics.chatStreamResumed()
                    self.logger.info("chat stream resumed on another replica", metadata: ["error": "\(error)"])
                }
            }
            self.metrics.downstreamFinished(service: "chat", code: .ok)
        } catch let error as RPCError
            where error.code == .unavailable
            && ["SUBSCRIBER_TOO_SLOW", "SERVER_DRAINING"].contains(error.errorDetail?.reason ?? "")
        {
            self.metrics.downstreamFinished(service: "chat", code: .unavailable)
            throw RPCError(.unavailable, error.message, metadata: GatewayErrors.trailer(error.errorDetail!))
        } catch {
            self.metrics.downstreamFinished(service: "chat", code: (error as? RPCError)?.code ?? .unavailable)
            throw GatewayErrors.fromDownstream(error, service: "chat", logger: self.logger)
        }
    }

    /// How many times in a row a Subscribe stream is resumed on another chat replica without an event between
    /// (pauses of 50 ms doubling to 1 s between them: about 4.5 s in all, past the 2 s health checks).
    static let subscribeResumes = 8

    /// Whether a Subscribe stream ended because its chat replica went away or could not serve it for a moment:
    /// its connection was lost, the replica is draining, or it was busy (reason UNAVAILABLE: its database refused
    /// a connection while the streams of a drained replica moved to it). Not SUBSCRIBER_TOO_SLOW: that one is
    /// the client's to see.
    static func chatReplicaLost(_ error: RPCError) -> Bool {
        guard error.code == .unavailable else { return false }
        guard let reason = error.errorDetail?.reason else { return true }
        return reason == "SERVER_DRAINING" || reason == "UNAVAILABLE"
    }

    /// Home's `chat` part: unread totals.
    func homeChatPart(_ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard let chat = self.chat else { return .init(name: "chat", essential: false, fetch: nil) }
        return .init(name: "chat", essential: false) {
            let totals = try await chat.call(ChatApi.ChatService.Method.getUnreadCount, .init(), as: caller)
            return { answer in
                answer.unreadMessages = totals.unreadMessages
                answer.unreadThreads = totals.unreadThreads
            }
        }
    }
}

extension Api.ChatMessage {
    init(_ message: ChatApi.ChatMessage) {
        self.init()
        self.messageId = message.messageId
        self.threadId = message.threadId
        self.senderUserId = message.senderUserId
        self.clientMessageId = message.clientMessageId
        self.body = message.body
        self.sequence = message.sequence
        self.sentUnixMs = message.sentUnixMs
    }
}

extension Api.ChatThread {
    init(_ thread: ChatApi.ChatThread) {
        self.init()
        self.threadId = thread.threadId
        self.otherUserId = thread.otherUserId
        self.state = Api.ThreadState(rawValue: thread.state.rawValue)
        self.lastMessage = thread.lastMessage.map(Api.ChatMessage.init)
        self.unreadCount = thread.unreadCount
        self.otherReadUpToMessageId = thread.otherReadUpToMessageId
        self.otherDeliveredUpToMessageId = thread.otherDeliveredUpToMessageId
        self.lastActivityUnixMs = thread.lastActivityUnixMs
    }
}

extension Api.SubscribeResponse {
    /// `caller`: the stream's user (a new match's direction is from their side).
    init(_ event: ChatApi.ChatEvent, caller: String?) {
        self.init()
        self.resumeToken = event.resumeToken
        self.occurredUnixMs = event.occurredUnixMs
        switch event.event {
        case .message(let message)?:
            self.event = .message(Api.ChatMessage(message))
        case .readReceipt(let receipt)?:
            self.event = .readReceipt(
                .with {
                    $0.threadId = receipt.threadId
                    $0.readerUserId = receipt.readerUserId
                    $0.upToMessageId = receipt.upToMessageId
                    $0.readUnixMs = receipt.readUnixMs
                })
        case .deliveryReceipt(let receipt)?:
            self.event = .deliveryReceipt(
                .with {
                    $0.threadId = receipt.threadId
                    $0.recipientUserId = receipt.recipientUserId
                    $0.upToMessageId = receipt.upToMessageId
                    $0.deliveredUnixMs = receipt.deliveredUnixMs
                })
        case .matchCreated(let notice)?:
            var summary = Api.MatchSummary()
            summary.matchId = notice.matchId
            summary.createdUnixMs = event.occurredUnixMs
            summary.direction =
                notice.mode == .oneWay ? (notice.initiatorUserId == caller ? .outgoing : .incoming) : .mutual
            self.event = .matchCreated(.with { $0.match = summary; $0.otherUserId = notice.otherUserId })
        case .threadClosed(let notice)?:
            self.event = .threadClosed(
                .with {
                    $0.threadId = notice.threadId
                    $0.reason = Api.ClosedThreadReason(rawValue: notice.reason.rawValue)
                })
        case .heartbeat(let heartbeat)?:
            self.event = .heartbeat(.with { $0.serverTimeUnixMs = heartbeat.serverTimeUnixMs })
        case .resyncRequired(let resync)?:
            self.event = .resyncRequired(.with { $0.oldestAvailableUnixMs = resync.oldestAvailableUnixMs })
        case .typing(let typing)?:
            self.event = .typing(.with { $0.threadId = typing.threadId; $0.userId = typing.userId })
        case nil:
            break
        }
    }
}
