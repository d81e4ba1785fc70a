extension PostgresConnection {
    /// Sends all statements at once in libpq's pipeline mode and returns their results in order.
    ///
    /// The statements end with one sync point, so outside an explicit transaction they run as one
    /// implicit transaction: if one fails, the batch throws that statement's error and none of the
    /// statements' effects remain. Inside `BEGIN … COMMIT` the transaction is aborted as usual.
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        if queries.isEmpty { return [] }
        return try await self.pipeline(groups: [queries])[0].get()
    }

    /// Sends several groups of statements at once, each group ending with a sync point of its own, and returns
    /// each group's results or the error of its first failing statement.
    ///
    /// A failing statement skips the rest of its group only: the server resumes at the group's sync point, so
    /// the next group runs (outside an explicit transaction each group is an implicit transaction of its own;
    /// inside one, the failure aborts it and the next group's statements fail until a ROLLBACK). The
    /// connection's loss throws for all of them. One writer can so commit one transaction and begin the next in
    /// one round trip, and still tell which of the two failed.
    public func pipeline(groups: [[PostgresQuery]]) async throws -> [Result<[PostgresRows], PostgresError>] {
        let groups = groups.filter { !$0.isEmpty }
        if groups.isEmpty { return [] }
        for query in groups.joined() { try query.bindings.validate() }
        // When traced, one span per statement, all spanning the round trip that carries them; a failed group marks
        // its spans. Untraced, no spans.
        let count = groups.reduce(0) { $0 + $1.count }
        let spans = StatementTracing.context.map { context in
            groups.map { group in group.map { StatementTracing.start($0, in: context, batchSize: count) } }
        } ?? []
        do {
            let results =
                if let poller = self.poller {
                    try await self.pipelinePolled(groups, on: poller)
                } else {
                    try await self.run { connection throws(PostgresError) in try connection.pipelineOnThread(groups) }
                }
            for (group, result) in zip(spans, results) {
                let error: PostgresError? = if case .failure(let error) = result { error } else { nil }
                for span in group { StatementTracing.end(span, error: error) }
            }
            return results
        } catch {
            for span in spans.joined() { StatementTracing.end(span, error: error as? PostgresError) }
            throw error
        }
    }

    /// The pipeline sent from the caller's thread and its results read by `poller` as they arrive (see
    /// ``PostgresPoller``): no pool thread waits for it.
    private func pipelinePolled(_ groups: [[PostgresQuery]], on poller: PostgresPoller) async throws
        -> [Result<[PostgresRows], PostgresError>]
    {
        if Task.isCancelled { throw PostgresError(code: .cancelled, reason: "the task was cancelled") }
        try self.claim(as: .running)
        self.polledPipelines += 1
        let outcome: Result<[Result<[PostgresRows], PostgresError>], PostgresError>
        do throws(PostgresError) {
            outcome = await self.awaitPolled(try self.startPipeline(groups), on: poller)
        } catch {
            outcome = .failure(error)
        }
        self.endPipeline()
        self.endOperation()
        return try outcome.get()
    }

    /// The pipeline on a pool thread, which waits in `poll(2)` between its reads.
    private func pipelineOnThread(_ groups: [[PostgresQuery]]) throws(PostgresError)
        -> [Result<[PostgresRows], PostgresError>]
    {
        defer { self.endPipeline() }
        let reader = try self.startPipeline(groups)
        var readable = false
        while true {
            switch reader.step(readable: readable) {
            case .finished(let outcome): return try outcome.get()
            case .waiting(let writable): readable = self.pq.waitForIO(write: writable, timeoutMilliseconds: -1)
            }
        }
    }

    /// Enters pipeline mode with a non-blocking socket and queues every statement and each group's sync point; the
    /// output goes as the socket allows while results are read, so a long batch cannot deadlock with the server (a
    /// blocking writer that never reads would fill both directions' buffers). ``endPipeline()`` afterwards, whatever
    /// happened.
    ///
    /// A statement not in the prepared-statement cache yet is prepared in the pipeline just before it runs (a result
    /// of its own), so that PostgreSQL keeps its plan as it does for `query`'s statements instead of planning it at
    /// every call. A preparation is cached once it succeeded; a group's own preparations serve its later statements
    /// with the same text.
    private func startPipeline(_ groups: [[PostgresQuery]]) throws(PostgresError) -> PipelineReader {
        let pq = self.pq
        guard pq.enterPipelineMode() else {
            throw PostgresError(
                code: .queryFailed,
                reason: "could not enter pipeline mode",
                serverMessage: pq.errorMessage
            )
        }
        guard pq.setNonBlocking(true) else { throw pq.lostOrFailed("could not make the socket non-blocking") }
        var slots: [[PipelineReader.Slot]] = []
        for group in groups {
            var groupSlots: [PipelineReader.Slot] = []
            var preparedHere: [StatementKey: String] = [:]
            for query in group {
                let sent: Bool
                if let name = self.cachedStatementName(for: query) ?? preparedHere[StatementKey(query)] {
                    sent = pq.sendQueryPrepared(name: name, query.bindings)
                } else if let statement = self.statementToPrepare(for: query) {
                    preparedHere[statement.key] = statement.name
                    groupSlots.append(.preparation(statement))
                    sent =
                        pq.sendPrepare(name: statement.name, sql: query.sql, types: statement.key.types)
                        && pq.sendQueryPrepared(name: statement.name, query.bindings)
                } else {
                    sent = pq.sendQueryParams(query.sql, query.bindings)
                }
                guard sent else { throw pq.lostOrFailed("could not queue a pipeline statement") }
                groupSlots.append(.statement)
            }
            guard pq.pipelineSync() else { throw pq.lostOrFailed("could not queue the pipeline sync") }
            slots.append(groupSlots)
        }
        return PipelineReader(connection: self, slots: slots)
    }

    /// Leaves pipeline mode and the socket blocking again. Leaving fails when results are still pending (an error
    /// left the batch half read): such a connection cannot be reused, so it is closed and the pool replaces it.
    private func endPipeline() {
        if !self.pq.exitPipelineMode() || !self.pq.setNonBlocking(false) {
            self.pq.finish()
        }
    }
}

/// A pipeline's results read as they arrive, group by group: each group's results or its first error, the
/// connection's loss for all. Stepped by one thread at a time (``PolledOperation``).
private final class PipelineReader: PolledOperation, @unchecked Sendable {
    /// What one result of a pipeline group answers.
    enum Slot {
        case preparation(PostgresConnection.PreparedStatement)
        case statement
    }

    private let connection: PostgresConnection
    private let slots: [[Slot]]
    private var pendingOutput = true
    private var outcomes: [Result<[PostgresRows], PostgresError>] = []
    // The group being read: its results so far, its first error, the statement whose results come next.
    private var results: [LibpqResult?]
    private var firstError: PostgresError?
    private var current = 0

    init(connection: PostgresConnection, slots: [[Slot]]) {
        self.connection = connection
        self.slots = slots
        self.results = Array(repeating: nil, count: slots[0].count)
    }

    func step(readable: Bool) -> PolledStep<[Result<[PostgresRows], PostgresError>]> {
        do throws(PostgresError) {
            return try self.advance(readable: readable)
        } catch {
            return .finished(.failure(error))
        }
    }

    private func advance(readable: Bool) throws(PostgresError) -> PolledStep<[Result<[PostgresRows], PostgresError>]> {
        let pq = self.connection.pq
        if self.pendingOutput {
            switch pq.flush() {
            case .done: self.pendingOutput = false
            case .pending: break
            case .failed: throw pq.lostOrFailed("could not send the pipeline")
            }
        }
        if readable && !pq.consumeInput() {
            throw pq.lostOrFailed("the connection was lost during a pipeline")
        }
        // Take every result libpq can hand out without blocking.
        while !pq.isBusy {
            guard let result = pq.getResult() else {
                // The end of one statement's results.
                self.current += 1
                guard self.current <= self.results.count else {
                    throw pq.lostOrFailed("the pipeline ended without its sync point")
                }
                continue
            }
            switch result.status {
            case .pipelineSync:
                // The end of a group (no statement result follows a sync point).
                let groupSlots = self.slots[self.outcomes.count]
                for (slot, result) in zip(groupSlots, self.results) {
                    if case .preparation(let statement) = slot, result?.status == .commandOK {
                        self.connection.cachePrepared(statement)
                    }
                }
                if let firstError = self.firstError {
                    self.outcomes.append(.failure(firstError))
                } else {
                    self.outcomes.append(
                        .success(
                            zip(groupSlots, self.results).compactMap { slot, result in
                                if case .statement = slot { PostgresRows(result!) } else { nil }
                            }))
                }
                if self.outcomes.count == self.slots.count { return .finished(.success(self.outcomes)) }
                self.results = Array(repeating: nil, count: self.slots[self.outcomes.count].count)
                self.firstError = nil
                self.current = 0
            case .tuplesOK, .commandOK, .emptyQuery:
                guard self.current < self.results.count else { throw pq.lostOrFailed("unexpected pipeline result") }
                self.results[self.current] = result
            case .fatalError:
                let error = PostgresError(
                    server: result.errorFields,
                    connectionBroken: pq.isBad,
                    cancelRequested: self.connection.cancelWasRequested
                )
                if error.code == .connectionLost { throw error }
                self.firstError = self.firstError ?? error
            case .pipelineAborted:
                break
            case .copy, .other:
                pq.finish()
                throw PostgresError(code: .queryFailed, reason: "unexpected result in a pipeline")
            }
        }
        return .waiting(writable: self.pendingOutput)
    }
}
