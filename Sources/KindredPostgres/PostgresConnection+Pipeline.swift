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
            let results = try await self.run { connection throws(PostgresError) in
                try connection.pipelineOnThread(groups)
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

    /// Pipeline mode with a non-blocking socket: everything is queued, the output flushed as the
    /// socket allows, and results read as they arrive, so a long batch cannot deadlock with the
    /// server (a blocking writer that never reads would fill both directions' buffers).
    private func pipelineOnThread(_ groups: [[PostgresQuery]]) throws(PostgresError)
        -> [Result<[PostgresRows], PostgresError>]
    {
        let pq = self.pq
        guard pq.enterPipelineMode() else {
            throw PostgresError(
                code: .queryFailed,
                reason: "could not enter pipeline mode",
                serverMessage: pq.errorMessage
            )
        }
        guard pq.setNonBlocking(true) else {
            _ = pq.exitPipelineMode()
            throw self.pq.lostOrFailed("could not make the socket non-blocking")
        }
        defer {
            // Exiting fails when results are still pending (an error path left the batch half read):
            // such a connection cannot be reused, so close it and let the pool replace it.
            if !pq.exitPipelineMode() || !pq.setNonBlocking(false) {
                pq.finish()
            }
        }

        // Each group's results in the order they come: a statement not in the prepared-statement cache yet is
        // prepared in the pipeline just before it runs (a result of its own), so that PostgreSQL keeps its plan as
        // it does for `query`'s statements instead of planning it at every call. A preparation is cached once it
        // succeeded; a group's own preparations serve its later statements with the same text.
        var slots: [[Slot]] = []
        for group in groups {
            var groupSlots: [Slot] = []
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
                guard sent else { throw self.pq.lostOrFailed("could not queue a pipeline statement") }
                groupSlots.append(.statement)
            }
            guard pq.pipelineSync() else { throw self.pq.lostOrFailed("could not queue the pipeline sync") }
            slots.append(groupSlots)
        }

        var outcomes: [Result<[PostgresRows], PostgresError>] = []
        // The group being read: its results so far, its first error, the statement whose results come next.
        var results: [LibpqResult?] = Array(repeating: nil, count: slots[0].count)
        var firstError: PostgresError?
        var current = 0
        var pendingOutput = true
        while true {
            if pendingOutput {
                switch pq.flush() {
                case .done: pendingOutput = false
                case .pending: break
                case .failed: throw self.pq.lostOrFailed("could not send the pipeline")
                }
            }
            // Take every result libpq can hand out without blocking.
            while !pq.isBusy {
                guard let result = pq.getResult() else {
                    // The end of one statement's results.
                    current += 1
                    guard current <= results.count else {
                        throw self.pq.lostOrFailed("the pipeline ended without its sync point")
                    }
                    continue
                }
                switch result.status {
                case .pipelineSync:
                    // The end of a group (no statement result follows a sync point).
                    let groupSlots = slots[outcomes.count]
                    for (slot, result) in zip(groupSlots, results) {
                        if case .preparation(let statement) = slot, result?.status == .commandOK {
                            self.cachePrepared(statement)
                        }
                    }
                    if let firstError {
                        outcomes.append(.failure(firstError))
                    } else {
                        outcomes.append(
                            .success(
                                zip(groupSlots, results).compactMap { slot, result in
                                    if case .statement = slot { PostgresRows(result!) } else { nil }
                                }))
                    }
                    if outcomes.count == groups.count { return outcomes }
                    results = Array(repeating: nil, count: slots[outcomes.count].count)
                    firstError = nil
                    current = 0
                case .tuplesOK, .commandOK, .emptyQuery:
                    guard current < results.count else { throw self.pq.lostOrFailed("unexpected pipeline result") }
                    results[current] = result
                case .fatalError:
                    let error = PostgresError(
                        server: result.errorFields,
                        connectionBroken: pq.isBad,
                        cancelRequested: self.cancelWasRequested
                    )
                    if error.code == .connectionLost { throw error }
                    firstError = firstError ?? error
                case .pipelineAborted:
                    break
                case .copy, .other:
                    pq.finish()
                    throw PostgresError(code: .queryFailed, reason: "unexpected result in a pipeline")
                }
            }
            let readable = pq.waitForIO(write: pendingOutput, timeoutMilliseconds: -1)
            if readable && !pq.consumeInput() {
                throw self.pq.lostOrFailed("the connection was lost during a pipeline")
            }
        }
    }

    /// What one result of a pipeline group answers.
    private enum Slot {
        case preparation(PreparedStatement)
        case statement
    }
}
