import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension MatchService {
    /// `Swipe`: validated here, decided and committed by the group-commit writer (`SwipeWriter`).
    func swipe(_ request: MatchApi.SwipeRequest, _ context: ServerContext) async throws -> MatchApi.SwipeResponse {
        let user = try await self.access.requireUser(context)
        let target = try Self.userID(request.targetUserId, field: "target_user_id")
        guard target != user.id else { throw MatchError.invalid("target_user_id", "SELF", "you cannot swipe on yourself") }
        let kind: SwipeKind
        switch request.action {
        case .like: kind = .like
        case .pass: kind = .pass
        default: throw MatchError.invalid("action", "REQUIRED", "LIKE or PASS")
        }
        _ = try TextRule.surface.validate(request.surface, field: "surface", as: MatchError.init)
        if let wait = self.swipeLimiter.acquire(user.id) {
            throw MatchError(.rateLimited, "Too many swipes; slow down", retryAfter: wait)
        }
        // Only on a member the swiper's deck could show (discovery answers from memory, whatever either swiped);
        // the writer decides with it, so an unknown and an out-of-reach member answer alike, and a retry replays.
        let shown = try await self.deckCouldShow(target, to: user.id)
        let reply = try await self.writer.submit(
            SwipeCommand(
                swiper: user.id, community: user.community, target: target, kind: kind, surface: request.surface,
                deckCouldShow: shown))
        self.swipeCounter.increment()
        if reply.swipe.outcome != .recorded, !reply.replayed { self.matchCounter.increment() }
        if reply.swipe.outcome != .recorded { try await self.awaitMatchConsumers(of: user.id) }
        var response = MatchApi.SwipeResponse()
        response.swipeId = reply.swipe.id
        response.outcome =
            switch reply.swipe.outcome {
            case .recorded: .recorded
            case .matched: .matched
            case .connected: .connected
            }
        if let match = reply.match { response.match = Self.matchMessage(match, viewer: user.id, other: target) }
        response.replayed = reply.replayed
        response.remainingLikes = Int32(clamping: reply.remainingLikes)
        return response
    }

    /// The consumers either side's first call after a match depends on: chat (the thread of the first message) and
    /// profile (the matched pair keeps seeing each other's card).
    static let matchConsumers: Set<String> = ["chat", "profile"]

    /// Returns once chat and profile have applied the events of `swiper`'s partition committed so far: the
    /// MatchCreated of a swipe that made a match or connection goes to the swiper's partition (`SwipeBatch`), so
    /// from the answer on, either side can message the other and see their card (DESIGN §6, read-your-writes).
    /// UNAVAILABLE with retry-after when one is still behind after `matchPropagationTimeout` (the swipe is
    /// recorded; retrying it is a replay that waits again).
    func awaitMatchConsumers(of swiper: String) async throws {
        let consumers = self.configuration.events.consumers.map(\.name).filter(Self.matchConsumers.contains)
        let started = ContinuousClock.now
        let applied = try await self.outbox.awaitDelivery(
            partition: swiper, consumers: consumers, on: self.database,
            timeout: self.configuration.matchPropagationTimeout)
        self.matchWait.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
        guard applied else {
            self.matchWaitTimeouts.increment()
            self.logger.warning("match not yet applied by chat and profile", metadata: ["partition.kind": "user"])
            throw MatchError(
                .unavailable, "The match is recorded but not yet in effect everywhere; retry", retryAfter: .seconds(1))
        }
    }

    /// Whether the swiper's deck could show the target (discovery's CheckCandidates), timed.
    private func deckCouldShow(_ target: String, to swiper: String) async throws -> Bool {
        let started = ContinuousClock.now
        defer { self.candidateCheckTime.recordNanoseconds((ContinuousClock.now - started).nanoseconds) }
        return try await self.candidateCheck.shown([target], to: swiper).contains(target)
    }

    /// `Undo`: the caller's last pass, within the community's window and daily limit (`UndoPolicy`).
    func undo(_ request: MatchApi.UndoRequest, _ context: ServerContext) async throws -> MatchApi.UndoResponse {
        let user = try await self.access.requireUser(context)
        let named: String? = request.swipeId.isEmpty ? nil : request.swipeId.lowercased()
        if let named, !UUIDv7.isValid(named) { throw MatchError.invalid("swipe_id", "INVALID_FORMAT", "a swipe id") }
        return try await self.database.withTransaction { transaction in
            // One undo at a time per user (the limit and "last swipe" are per user).
            try await self.swipes.lockPair(user.id, user.id, in: transaction)
            let settings = try await self.directory.settings(user.community, in: transaction)
            let policy = UndoPolicy(windowSeconds: Int64(settings.undoWindowSeconds), dailyLimit: settings.dailyUndoLimit)
            let now = PostgresTimestamp.now
            let since = PostgresTimestamp(microsecondsSinceEpoch: now.microsecondsSinceEpoch - 86_400_000_000)
            let latest = try await self.swipes.latestSwipe(of: user.id, in: transaction)
            let undoneTarget = try await named.asyncMap {
                try await self.swipes.undoneTarget(swipeID: $0, swiper: user.id, in: transaction)
            } ?? nil
            let undos = try await self.swipes.undosSince(since, swiper: user.id, in: transaction)
            let decision = policy.decide(
                latest: latest?.0, named: named, namedWasUndone: undoneTarget != nil, undosInWindow: undos,
                nowUnixMs: now.millisecondsSinceEpoch)
            var response = MatchApi.UndoResponse()
            switch decision {
            case .replay:
                response.swipeId = named ?? ""
                response.targetUserId = undoneTarget ?? ""
                response.remainingUndos = Int32(max(0, policy.dailyLimit - undos.count))
                return response
            case .notFound:
                throw MatchError(.notFound, "No swipe to undo")
            case .notAllowed:
                throw MatchError(.undoNotAllowed, "Only your last pass can be undone, within the undo window")
            case .limitReached(let reset):
                throw MatchError(
                    .undoLimit, "Daily undo limit reached; try again later",
                    retryAfter: .milliseconds(max(1, reset - now.millisecondsSinceEpoch)))
            case .undo:
                guard let (swipe, target) = latest else { throw MatchError(.notFound, "No swipe to undo") }
                try await self.swipes.undo(swipeID: swipe.id, swiper: user.id, target: target, at: now, in: transaction)
                var event = CommonApi.Event()
                event.userId = user.id
                event.communityId = user.community
                event.payload = .swipeUndone(
                    .with {
                        $0.swipeId = swipe.id
                        $0.targetUserId = target
                    })
                try await self.outbox.append(event, in: transaction)
                response.swipeId = swipe.id
                response.targetUserId = target
                response.remainingUndos = Int32(max(0, policy.dailyLimit - undos.count - 1))
                return response
            }
        }
    }

    /// A match as `viewer` sees it.
    static func matchMessage(_ match: MatchRecord, viewer: String, other: String) -> MatchApi.Match {
        var message = MatchApi.Match()
        message.matchId = match.id
        message.otherUserId = other
        message.mode = match.mode == .mutual ? .mutual : .oneWay
        message.direction =
            match.mode == .mutual || match.reciprocatedUnixMs != nil
            ? .mutual : (match.initiator == viewer ? .outgoing : .incoming)
        message.createdUnixMs = match.createdUnixMs
        message.reciprocatedUnixMs = match.reciprocatedUnixMs ?? 0
        return message
    }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
