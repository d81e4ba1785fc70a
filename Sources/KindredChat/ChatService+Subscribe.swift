import KindredGRPC
import KindredPostgres
import KindredProto

extension ChatService {
    /// Events read from the log per query while catching up.
    static let catchUpBatch = 500

    /// `Subscribe`: the caller's event log from the resume token (or from now), then live events, each
    /// position exactly once and in order (`SubscriptionCursor`), typing indicators as they come, heartbeats in
    /// silence. The stream registers with the hub before it reads the log, so nothing committed in between is
    /// missed. It ends with SUBSCRIBER_TOO_SLOW when its queue overflows and SERVER_DRAINING when the server
    /// stops; the client resumes with its last token either way.
    func subscribe(
        _ request: Chat.SubscribeRequest, _ writer: ResponseWriter<Chat.SubscribeResponse>, _ context: ServerContext
    ) async throws {
        let user = try await self.access.requireUser(context).id
        var resumeFrom: Int64?
        if !request.resumeToken.isEmpty {
            guard let position = ResumeToken.decode(request.resumeToken) else {
                throw ChatError.invalid("resume_token", "RESUME_TOKEN_INVALID", "a resume_token received on this stream")
            }
            resumeFrom = position
        }
        guard self.hub.streams(of: user) < self.configuration.maxStreamsPerUser else {
            throw ChatError.rateLimited("Too many open streams for this account", retryAfter: .seconds(5))
        }
        guard let (id, signals) = self.hub.subscribe(user) else {
            throw ChatError(.serverDraining, "The server is stopping; reconnect")
        }
        defer { self.hub.unsubscribe(id) }
        let presence = try await self.presence.join(user)
        defer { self.presence.leave(presence) }

        let (last, purgedThrough) = try await self.log.position(of: user, in: self.database)
        var cursor = SubscriptionCursor(position: last)
        if let resumeFrom {
            // Older than the retained log, or ahead of it (the database was restored to an earlier time, so the
            // client saw events that are gone): the client refetches its threads, then gets live events.
            if resumeFrom < purgedThrough || resumeFrom > last {
                var resync = Chat.ResyncRequired()
                resync.oldestAvailableUnixMs = Self.nowMs() - self.configuration.eventRetentionSeconds * 1000
                var event = Self.event(.resyncRequired(resync))
                event.resumeToken = ResumeToken.encode(last)
                try await self.write(event, writer)
            } else {
                cursor = SubscriptionCursor(position: resumeFrom)
            }
        }
        try await self.catchUp(&cursor, user: user, writer)

        for await signal in signals {
            if self.hub.endReason(id) != nil { break }
            switch signal {
            case .logged(let sequence, let event):
                switch cursor.announced(sequence: sequence, carriesEvent: event != nil) {
                case .deliver:
                    var event = event!
                    event.resumeToken = ResumeToken.encode(sequence)
                    try await self.write(event, writer)
                case .skip:
                    break
                case .fetch, .heartbeat:
                    try await self.catchUp(&cursor, user: user, writer)
                }
            case .ephemeral(let event):
                cursor.wroteEphemeral()
                try await self.write(event, writer)
            case .resynchronize:
                try await self.catchUp(&cursor, user: user, writer)
            case .tick:
                if case .heartbeat = cursor.tick() {
                    var heartbeat = Chat.Heartbeat()
                    heartbeat.serverTimeUnixMs = Self.nowMs()
                    try await self.write(Self.event(.heartbeat(heartbeat)), writer)
                }
            }
        }
        switch self.hub.endReason(id) {
        case .overflow?:
            throw ChatError(.subscriberTooSlow, "The stream fell behind; resume with the last resume_token")
        case .draining?:
            throw ChatError(.serverDraining, "The server is stopping; resume with the last resume_token")
        case nil:
            return  // the client went away
        }
    }

    /// Hands out everything in the log after the cursor.
    private func catchUp(
        _ cursor: inout SubscriptionCursor, user: String, _ writer: ResponseWriter<Chat.SubscribeResponse>
    ) async throws {
        while true {
            let entries = try await self.log.events(
                of: user, after: cursor.position, limit: Self.catchUpBatch, in: self.database)
            let fresh = Set(cursor.fetched(entries.map(\.sequence)))
            for entry in entries where fresh.contains(entry.sequence) {
                var event = entry.event
                event.resumeToken = ResumeToken.encode(entry.sequence)
                try await self.write(event, writer)
            }
            if entries.count < Self.catchUpBatch { return }
        }
    }

    private func write(_ event: Chat.ChatEvent, _ writer: ResponseWriter<Chat.SubscribeResponse>) async throws {
        var response = Chat.SubscribeResponse()
        response.event = event
        try await writer.write(response)
    }
}
