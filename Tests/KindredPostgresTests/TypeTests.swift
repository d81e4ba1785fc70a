import KindredPostgres
import Testing

@Suite struct TypeTests {
    @Test func integersBoolsAndDoublesRoundTrip() async throws {
        try await withTestClient { client in
            let row = try await client.query(
                """
                SELECT \(Int64.max), \(Int64.min), \(Int32.min), \(Int16(-7)), \(42), \(true), \(false),
                       \(3.25), \(-0.0), \(Double.infinity), \(Double.nan), \(Double.leastNonzeroMagnitude)
                """
            )[0]
            #expect(try row.decode(Int64.self, at: 0) == .max)
            #expect(try row.decode(Int64.self, at: 1) == .min)
            #expect(try row.decode(Int32.self, at: 2) == .min)
            #expect(try row.decode(Int16.self, at: 3) == -7)
            #expect(try row.decode(Int.self, at: 4) == 42)
            #expect(try row.decode(Bool.self, at: 5) == true)
            #expect(try row.decode(Bool.self, at: 6) == false)
            #expect(try row.decode(Double.self, at: 7) == 3.25)
            #expect(try row.decode(Double.self, at: 8).sign == .minus)
            #expect(try row.decode(Double.self, at: 9) == .infinity)
            #expect(try row.decode(Double.self, at: 10).isNaN)
            #expect(try row.decode(Double.self, at: 11) == .leastNonzeroMagnitude)
        }
    }

    @Test func columnsOfEveryTypeStoreAndLoad() async throws {
        try await withTestClient { client in
            try await client.execute(
                """
                CREATE TABLE things (
                    id bigint PRIMARY KEY, small int4, flag bool, ratio float8, label text, data bytea,
                    at timestamptz, ids int8[], tags text[], ref uuid, doc jsonb
                )
                """
            )
            let bytes = (0...255).map { UInt8($0) }
            let at = PostgresTimestamp(microsecondsSinceEpoch: 1_709_214_300_000_001)
            let tags = ["plain", "with space", "comma,brace{}", "quote\"s", "back\\slash", "NULL", "", "ünï 🐕"]
            try await client.execute(
                """
                INSERT INTO things VALUES (\(1), \(Int32(5)), \(true), \(0.1), \("Grüße, 世界 👋"), \(bytes),
                    \(at), \([Int64(1), -2, .max]), \(tags), \("6f1c2a34-5b6d-4e7f-8091-a2b3c4d5e6f7"),
                    \(#"{"breed": "beagle"}"#))
                """
            )
            let nothing: String? = nil
            let noBytes: [UInt8]? = nil
            try await client.execute(
                """
                INSERT INTO things VALUES (\(2), \(Int32?.none), \(Bool?.none), \(Double?.none), \(nothing),
                    \(noBytes), \(PostgresTimestamp?.none), \([Int64]?.none), \([String]?.none), \(nothing), \(nothing))
                """
            )

            let rows = try await client.query("SELECT * FROM things ORDER BY id")
            #expect(rows.count == 2)
            #expect(
                rows.columnNames == [
                    "id", "small", "flag", "ratio", "label", "data", "at", "ids", "tags", "ref", "doc",
                ]
            )
            let full = rows[0]
            #expect(try full.decode(Int32.self, column: "small") == 5)
            #expect(try full["flag", as: Bool.self])
            #expect(try full.decode(Double.self, column: "ratio") == 0.1)
            #expect(try full.decode(String.self, column: "label") == "Grüße, 世界 👋")
            #expect(try full.decode([UInt8].self, column: "data") == bytes)
            #expect(try full.decode(PostgresTimestamp.self, column: "at") == at)
            #expect(try full.decode([Int64].self, column: "ids") == [1, -2, .max])
            #expect(try full.decode([String].self, column: "tags") == tags)
            #expect(try full.decode(String.self, column: "ref") == "6f1c2a34-5b6d-4e7f-8091-a2b3c4d5e6f7")
            #expect(try full.decode(String.self, column: "doc") == #"{"breed": "beagle"}"#)

            let empty = rows[1]
            for column in 1..<empty.columnCount {
                #expect(empty.isNull(at: column))
            }
            #expect(try empty.decode(Int32?.self, column: "small") == nil)
            #expect(try empty.decode(String?.self, column: "label") == nil)
            #expect(try empty.decode([UInt8]?.self, column: "data") == nil)
            #expect(try empty.decode(PostgresTimestamp?.self, column: "at") == nil)
            #expect(try empty.decode([String]?.self, column: "tags") == nil)
            let error = #expect(throws: PostgresError.self) { try empty.decode(String.self, column: "label") }
            #expect(error?.code == .decodingFailed)
            #expect(error?.column == "label")
        }
    }

    @Test func byteaWithEveryByteValueAsParameterAndFromServerHex() async throws {
        try await withTestClient { client in
            let bytes = (0...255).map { UInt8($0) } + [0, 0, 255]
            let echoed = try await client.query("SELECT \(bytes), length(\(bytes))")[0]
            #expect(try echoed.decode([UInt8].self, at: 0) == bytes)
            #expect(try echoed.decode(Int.self, at: 1) == bytes.count)
            // Built by the server from hex text, decoded from binary.
            let hex = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            let fromHex = try await client.query("SELECT decode(\(hex), 'hex')").scalar([UInt8].self)
            #expect(fromHex == bytes)
            #expect(try await client.query("SELECT \([UInt8]())").scalar([UInt8].self) == [])
        }
    }

    @Test func unicodeTextSurvivesUnchanged() async throws {
        try await withTestClient { client in
            let samples = [
                "", "a", "Ωμέγα", "日本語のテキスト", "🐕‍🦺🏳️‍🌈", "e\u{301}", "tab\tnewline\n",
                String(repeating: "ß", count: 10_000),
            ]
            for sample in samples {
                let row = try await client.query("SELECT \(sample)::text, length(\(sample)), octet_length(\(sample))")[
                    0
                ]
                #expect(try row.decode(String.self, at: 0) == sample)
                #expect(try row.decode(Int.self, at: 1) == sample.unicodeScalars.count)
                #expect(try row.decode(Int.self, at: 2) == sample.utf8.count)
            }
        }
    }

    @Test func aNulCharacterInAStringIsRefusedNotTruncated() async throws {
        try await withTestClient { client in
            let error = await #expect(throws: PostgresError.self) {
                _ = try await client.query("SELECT \("before\u{0}after")")
            }
            #expect(error?.code == .invalidParameter)
            #expect(error.map { !$0.description.contains("before") } ?? false)
        }
    }

    @Test func timestamps() async throws {
        try await withTestClient { client in
            // now() is read between these two: however long the query waits on a busy machine, the server's time
            // decoded must fall within the bracket (both clocks are this machine's; 1 ms for rounding).
            let before = PostgresTimestamp.now
            let row = try await client.query(
                """
                SELECT '2024-02-29 13:45:00.000001+00'::timestamptz, '1969-12-31 23:59:59.5+00'::timestamptz,
                       '1999-01-01 00:00:00'::timestamp, 'infinity'::timestamptz, '-infinity'::timestamptz,
                       now(), extract(epoch FROM \(PostgresTimestamp(millisecondsSinceEpoch: 1_700_000_000_123)))::float8
                """
            )[0]
            let after = PostgresTimestamp.now
            let leapDay = try row.decode(PostgresTimestamp.self, at: 0)
            #expect(leapDay.description == "2024-02-29T13:45:00.000001Z")
            #expect(leapDay.millisecondsSinceEpoch == 1_709_214_300_000)
            let beforeEpoch = try row.decode(PostgresTimestamp.self, at: 1)
            #expect(beforeEpoch.microsecondsSinceEpoch == -500_000)
            #expect(beforeEpoch.millisecondsSinceEpoch == -500)
            #expect(beforeEpoch.description == "1969-12-31T23:59:59.500000Z")
            #expect(try row.decode(PostgresTimestamp.self, at: 2).description == "1999-01-01T00:00:00.000000Z")
            #expect(try row.decode(PostgresTimestamp.self, at: 3) == .infinity)
            #expect(try row.decode(PostgresTimestamp.self, at: 4) == .negativeInfinity)
            let serverNow = try row.decode(PostgresTimestamp.self, at: 5)
            #expect(serverNow.millisecondsSinceEpoch >= before.millisecondsSinceEpoch - 1)
            #expect(serverNow.millisecondsSinceEpoch <= after.millisecondsSinceEpoch + 1)
            #expect(try row.decode(Double.self, at: 6) == 1_700_000_000.123)

            let infinity = try await client.query("SELECT \(PostgresTimestamp.infinity) = 'infinity'::timestamptz")
            #expect(try infinity.scalar(Bool.self))
        }
    }

    @Test func arrays() async throws {
        try await withTestClient { client in
            let ids: [Int64] = [3, 1, 4, 1, 5, 9, 2, 6]
            let rows = try await client.query(
                "SELECT x FROM unnest(\([Int64](1...10))) AS x WHERE x = ANY(\(ids)) ORDER BY x"
            )
            #expect(try rows.map { try $0.decode(Int64.self, at: 0) } == [1, 2, 3, 4, 5, 6, 9])
            let row = try await client.query(
                """
                SELECT \([String]()), \([Int64]()), ARRAY[1, 2]::int4[], array_length(\(["a", "b", "c"]), 1),
                       \([true, false])
                """
            )[0]
            #expect(try row.decode([String].self, at: 0) == [])
            #expect(try row.decode([Int64].self, at: 1) == [])
            #expect(try row.decode([Int64].self, at: 2) == [1, 2])
            #expect(try row.decode(Int.self, at: 3) == 3)
            #expect(try row.decode([Bool].self, at: 4) == [true, false])
            let withNull = try await client.query("SELECT ARRAY[1, NULL]::int8[]")[0]
            #expect(throws: PostgresError.self) { try withNull.decode([Int64].self, at: 0) }
        }
    }

    @Test func sqlInjectionThroughAParameterStaysData() async throws {
        try await withTestClient { client in
            try await client.execute("CREATE TABLE users (name text)")
            let attacks = [
                "'; DROP TABLE users; --",
                "x' OR '1'='1",
                "$1",
                "\\'; SELECT pg_sleep(10); --",
                "Robert'); DROP TABLE users;--",
            ]
            for attack in attacks {
                try await client.execute("INSERT INTO users (name) VALUES (\(attack))")
            }
            let stored = try await client.query("SELECT name FROM users").map { try $0.decode(String.self, at: 0) }
            #expect(stored == attacks)
            let matches = try await client.query("SELECT count(*) FROM users WHERE name = \("x' OR '1'='1' --x")")
            #expect(try matches.scalar(Int.self) == 0)
        }
    }

    @Test func decodingByNameByTupleAndMismatches() async throws {
        try await withTestClient { client in
            let row = try await client.query("SELECT 7::int8 AS id, 'ada'::text AS name, 2.5::numeric AS price")[0]
            let (id, name) = try row.decode((Int64, String).self)
            #expect(id == 7 && name == "ada")
            #expect(try row["name", as: String.self] == "ada")
            let missing = #expect(throws: PostgresError.self) { try row.decode(Int.self, column: "nope") }
            #expect(missing?.code == .decodingFailed)
            let mismatch = #expect(throws: PostgresError.self) { try row.decode(Int.self, column: "name") }
            #expect(mismatch?.code == .decodingFailed)
            #expect(mismatch?.column == "name")
            #expect(throws: PostgresError.self) { try row.decode(Double.self, column: "price") }
        }
    }

    @Test func stringsBindToUuidEnumAndJsonbColumnsWithoutCasts() async throws {
        try await withTestClient { client in
            try await client.execute("CREATE TYPE swipe AS ENUM ('like', 'pass')")
            try await client.execute("CREATE TABLE swipes (id uuid PRIMARY KEY, kind swipe, meta jsonb)")
            let id = "0b6c8f4e-2a37-4c1d-9e8f-1a2b3c4d5e6f"
            try await client.execute("INSERT INTO swipes VALUES (\(id), \("like"), \(#"{"a": 1}"#))")
            let row = try await client.query("SELECT id, kind, meta FROM swipes WHERE id = \(id)")[0]
            #expect(try row.decode(String.self, at: 0) == id)
            #expect(try row.decode(String.self, at: 1) == "like")
            #expect(try row.decode(String.self, at: 2) == #"{"a": 1}"#)
        }
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000000Z"),
        (Int64(951_782_400_000_000), "2000-02-29T00:00:00.000000Z"),
        (Int64(-62_135_596_800_000_000), "0001-01-01T00:00:00.000000Z"),
        (Int64(253_402_300_799_999_999), "9999-12-31T23:59:59.999999Z"),
    ])
    func timestampDescription(micros: Int64, text: String) {
        #expect(PostgresTimestamp(microsecondsSinceEpoch: micros).description == text)
    }
}
