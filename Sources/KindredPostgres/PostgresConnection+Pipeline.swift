extension PostgresConnection {
    /// Sends all statements at once in libpq's pipeline mode and returns their results in order.
    ///
    /// The statements end with one sync point, so outside an explicit transaction they run as one
    /// implicit transaction: if one fails, the batch throws that statement's error and none of the
    /// statements' effects remain. Inside `BEGIN … COMMIT` the transaction is aborted as usual.
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        if queries.isEmpty { return [] }
        for query in queries { try query.bindings.validate() }
        return try await self.run { connection throws(PostgresError) in
            try connection.pipelineOnThread(queries)
        }
    }

    /// Pipeline mode with a non-blocking socket: everything is queued, the output flushed as the
    /// socket allows, and results read as they arrive, so a long batch cannot deadlock with the
    /// server (a blocking writer that never reads would fill both directions' buffers).
    private func pipelineOnThread(_ queries: [PostgresQuery]) throws(PostgresError) -> [PostgresRows] {
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
            throw self.lostOrFailed("could not make the socket non-blocking")
        }
        defer {
            // Exiting fails when results are still pending (an error path left the batch half read):
            // such a connection cannot be reused, so close it and let the pool replace it.
            if !pq.exitPipelineMode() || !pq.setNonBlocking(false) {
                pq.finish()
            }
        }

        for query in queries {
            let sent =
                if let name = self.cachedStatementName(for: query) {
                    pq.sendQueryPrepared(name: name, query.bindings)
                } else {
                    pq.sendQueryParams(query.sql, query.bindings)
                }
            guard sent else { throw self.lostOrFailed("could not queue a pipeline statement") }
        }
        guard pq.pipelineSync() else { throw self.lostOrFailed("could not queue the pipeline sync") }

        var results: [LibpqResult?] = Array(repeating: nil, count: queries.count)
        var firstError: PostgresError?
        var current = 0
        var pendingOutput = true
        while true {
            if pendingOutput {
                switch pq.flush() {
                case .done: pendingOutput = false
                case .pending: break
                case .failed: throw self.lostOrFailed("could not send the pipeline")
                }
            }
            // Take every result libpq can hand out without blocking.
            while !pq.isBusy {
                guard let result = pq.getResult() else {
                    // The end of one statement's results.
                    current += 1
                    guard current <= results.count else {
                        throw self.lostOrFailed("the pipeline ended without its sync point")
                    }
                    continue
                }
                switch result.status {
                case .pipelineSync:
                    if let firstError { throw firstError }
                    return results.map { PostgresRows($0!) }
                case .tuplesOK, .commandOK, .emptyQuery:
                    guard current < results.count else { throw self.lostOrFailed("unexpected pipeline result") }
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
                throw self.lostOrFailed("the connection was lost during a pipeline")
            }
        }
    }

    private func lostOrFailed(_ reason: String) -> PostgresError {
        PostgresError(
            code: self.pq.isBad ? .connectionLost : .queryFailed,
            reason: reason,
            serverMessage: self.pq.errorMessage
        )
    }
}
