import KindredPostgres

/// Transaction-scoped advisory locks of one kind (`lockClass`, the first key) on text keys (hashed, the second key),
/// as notify's stores take them for an event batch (``EventBatchLocks``).
enum AdvisoryLocks {
    /// Holds the locks of `keys` until the transaction ends, taken one after the other in the order given (sorted,
    /// so that two transactions never wait on each other in a cycle); shared locks when `shared`.
    static func take(
        _ keys: [String], class lockClass: Int32, shared: Bool = false, in transaction: PostgresTransaction
    ) async throws {
        guard !keys.isEmpty else { return }
        let function = shared ? "pg_advisory_xact_lock_shared" : "pg_advisory_xact_lock"
        try await transaction.execute(
            """
            SELECT \(unescaped: function)(\(lockClass), hashtext(key))
            FROM unnest(\(keys)::text[]) WITH ORDINALITY AS locked(key, position) ORDER BY position
            """
        )
    }
}
