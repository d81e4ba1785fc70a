import Dispatch
import KindredPostgres
import KindredProto

/// A user id decoded straight from a binary `uuid` column (a rebuild reads millions: no text round trip).
extension UserKey: PostgresDecodable {
    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        guard type == .uuid, bytes.count == 16 else { throw PostgresError(code: .decodingFailed, reason: "a user key is a 16-byte uuid") }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for i in 0..<8 { high = high << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { low = low << 8 | UInt64(bytes[i]) }
        self.init(high: high, low: low)
    }
}

/// A page of decoded candidates, filled by several threads at distinct indices.
private final class DecodedPage: @unchecked Sendable {
    private(set) var results: [Result<(UserKey, Kindred.Common.V1.CandidateSnapshot), any Error>?]

    init(count: Int) {
        self.results = Array(repeating: nil, count: count)
    }

    /// Safe from several threads at once: each index is written by one thread, the array never reallocates.
    func set(_ index: Int, _ result: Result<(UserKey, Kindred.Common.V1.CandidateSnapshot), any Error>) {
        self.results.withUnsafeMutableBufferPointer { $0[index] = result }
    }
}

/// A swipe as a rebuild reads it: keys, not text.
struct StoredSwipe: Sendable {
    var viewer: UserKey
    var target: UserKey
    var community: String
    var liked: Bool
    var features: RankingFeatures?
    var targetInterests: InterestSet
}

/// The rebuild's reads: whole tables streamed through cursors in one read-only REPEATABLE READ transaction
/// (one consistent snapshot, no statement timeout: an admin path reading millions of rows), `page` rows per
/// FETCH, the next page fetched while the caller handles the current one.
extension ProjectionStore {
    /// Runs `body` in the rebuild's transaction.
    func rebuildTransaction<T>(on database: PostgresClient, _ body: (PostgresTransaction) async throws -> T) async throws -> T {
        try await database.withTransaction(isolation: .repeatableRead, readOnly: true, maxAttempts: 1) { transaction in
            try await transaction.execute("SET LOCAL statement_timeout = 0")
            return try await body(transaction)
        }
    }

    /// Declares the cursor `name` (`declare` is its DECLARE statement) and streams it, handing each page to `body`.
    func stream(
        _ declare: PostgresQuery, cursor name: String, page: Int, in transaction: PostgresTransaction,
        _ body: (PostgresRows) throws -> Void
    ) async throws {
        try await transaction.execute(declare)
        let fetch = PostgresQuery(unsafeSQL: "FETCH FORWARD \(max(1, page)) FROM \(name)")
        var rows = try await transaction.query(fetch)
        while !rows.isEmpty {
            let more = rows.count >= page
            async let next = more ? transaction.query(fetch) : nil
            try body(rows)
            guard let following = try await next else { break }
            rows = following
        }
        try await transaction.execute(PostgresQuery(unsafeSQL: "CLOSE \(name)"))
    }

    /// Every active candidate (of one community, or all): user, snapshot.
    func streamCandidates(
        only community: String?, page: Int, in transaction: PostgresTransaction,
        _ body: (UserKey, Kindred.Common.V1.CandidateSnapshot) throws -> Void
    ) async throws {
        let query: PostgresQuery =
            if let community {
                "DECLARE rebuild_candidates NO SCROLL CURSOR FOR SELECT user_id, snapshot FROM candidates WHERE NOT deactivated AND community_id = \(community)"
            } else {
                "DECLARE rebuild_candidates NO SCROLL CURSOR FOR SELECT user_id, snapshot FROM candidates WHERE NOT deactivated"
            }
        try await self.stream(query, cursor: "rebuild_candidates", page: page, in: transaction) { rows in
            // Protobuf decoding on every core (the caller's inserts stay serial, in row order).
            let parts = min(rows.count, 4)
            let decoded = DecodedPage(count: rows.count)
            DispatchQueue.concurrentPerform(iterations: parts) { part in
                for index in stride(from: part, to: rows.count, by: parts) {
                    let row = rows[index]
                    decoded.set(index, Result {
                        (try row.decode(UserKey.self, at: 0),
                         try Kindred.Common.V1.CandidateSnapshot(serializedBytes: try row.decode([UInt8].self, at: 1)))
                    })
                }
            }
            for result in decoded.results {
                let (key, snapshot) = try result!.get()
                try body(key, snapshot)
            }
        }
    }

    /// Every swipe (of one community, or all) in the order they were learned from.
    func streamSwipes(
        only community: String?, page: Int, in transaction: PostgresTransaction, _ body: (StoredSwipe) throws -> Void
    ) async throws {
        let columns = "viewer_id, target_id, community_id, liked, features, target_interests"
        let query: PostgresQuery =
            if let community {
                "DECLARE rebuild_swipes NO SCROLL CURSOR FOR SELECT \(unescaped: columns) FROM swipes WHERE community_id = \(community) ORDER BY seq"
            } else {
                "DECLARE rebuild_swipes NO SCROLL CURSOR FOR SELECT \(unescaped: columns) FROM swipes ORDER BY seq"
            }
        try await self.stream(query, cursor: "rebuild_swipes", page: page, in: transaction) { rows in
            for row in rows {
                let features = try row.decode([Double]?.self, at: 4)
                try body(StoredSwipe(
                    viewer: try row.decode(UserKey.self, at: 0), target: try row.decode(UserKey.self, at: 1),
                    community: try row.decode(String.self, at: 2), liked: try row.decode(Bool.self, at: 3),
                    features: features.flatMap { $0.count == 8 ? RankingFeatures(SIMD8($0)) : nil },
                    targetInterests: InterestSet(bits: UInt64(bitPattern: try row.decode(Int64.self, at: 5)))))
            }
        }
    }

    /// Every pair kept apart (blocks and ended matches alike keep a pair out of each other's decks).
    func streamExclusions(page: Int, in transaction: PostgresTransaction, _ body: (UserKey, UserKey) throws -> Void)
        async throws
    {
        try await self.stream(
            "DECLARE rebuild_exclusions NO SCROLL CURSOR FOR SELECT user_id, other_id FROM exclusions", cursor: "rebuild_exclusions", page: page, in: transaction
        ) { rows in
            for row in rows { try body(try row.decode(UserKey.self, at: 0), try row.decode(UserKey.self, at: 1)) }
        }
    }
}
