import Dispatch
import Foundation
import KindredDiscovery
import KindredGeo
import KindredPostgres
import KindredPostgresTesting
import KindredProto
import KindredServiceKit
import Logging

// Discovery through PostgreSQL at scale (issue 12): N members (default 5,000,000) in cities of Zipf-like sizes
// and S swipes each are COPYed into discovery's tables (psql \copy) of a private PostgreSQL (TestPostgres:
// fsync off), the index is rebuilt from them by the service's own RebuildIndex path, then decks (find the
// pool, rank it) run on T threads for D seconds; the same nearest-compatible query runs as PostgreSQL GiST KNN
// (a point column, the filters in WHERE) on T connections for D seconds, for the ratio.
// Usage: kindred-discovery-pg-bench [members] [swipes per member] [seconds] [threads] [features 1|0]
//        kindred-discovery-pg-bench generate members swipes-per-member folder [features 1|0]
// `generate` only writes the population (candidates.tsv and swipes.tsv for COPY into discovery's tables, with
// features unless told 0, and viewers.txt: every member's user id) into the folder and exits:
// Tests/Benchmarks/discovery-grpc.sh loads it into a running cluster's PostgreSQL.
let generateOnly = CommandLine.arguments.dropFirst().first == "generate"
let arguments = Array(CommandLine.arguments.dropFirst(generateOnly ? 2 : 1))
let memberCount = arguments.count > 0 ? Int(arguments[0]) ?? 5_000_000 : 5_000_000
let swipesPerMember = arguments.count > 1 ? Int(arguments[1]) ?? 2 : 2
let seconds = arguments.count > 2 ? Double(arguments[2]) ?? 10 : 10
let threads = arguments.count > 3 ? Int(arguments[3]) ?? 2 : 2
/// Whether swipes carry ranking features (the models learn from them; 0: they only exclude, as swipes that
/// arrived before either side was indexed).
let withFeatures = generateOnly ? (arguments.count > 3 ? arguments[3] != "0" : true) : arguments.count > 4 ? arguments[4] != "0" : true

func residentMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Double(line.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? 0) / 1024
    }
    return 0
}

/// CPU seconds this process used so far (user + system): the work, whatever else shares the machine.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// The 1-minute load average (the machine is shared: every figure comes with it).
func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?"
}

struct Random: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

func seconds(since start: ContinuousClock.Instant) -> String {
    String(format: "%.1f s", (ContinuousClock.now - start) / .seconds(1))
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}

func uuid(_ random: inout Random) -> String {
    // A version-7-shaped id (the service checks the format).
    let a = random.next(), b = random.next()
    let text = String(format: "%016llx%016llx", (a & 0xffff_ffff_ffff_0fff) | 0x7000, (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000)
    let c = Array(text)
    return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
}

/// Unbuffered lines (a crash must not swallow what was measured before it).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
var logger = Logger(label: "kindred.discovery.pg-bench")
logger.logLevel = .info  // the rebuild's phases ("index rebuilt")
// ---- Generate ----
var random = Random(state: 12345)
let cityCount = 400
let cities = (0..<cityCount).map { _ in
    (Double.random(in: -40...60, using: &random), Double.random(in: -120...150, using: &random))
}
let harmonic = (1...cityCount).reduce(0.0) { $0 + 1 / Double($1) }
var cityOf: [Int] = []
for city in 0..<cityCount {
    cityOf.append(contentsOf: repeatElement(city, count: Int(Double(memberCount) / (harmonic * Double(city + 1)))))
}
while cityOf.count < memberCount { cityOf.append(Int.random(in: 0..<cityCount, using: &random)) }
let folder = generateOnly
    ? URL(fileURLWithPath: arguments.count > 2 ? arguments[2] : "population")
    : FileManager.default.temporaryDirectory.appendingPathComponent("kindred-pg-bench-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { if !generateOnly { try? FileManager.default.removeItem(at: folder) } }
let started = ContinuousClock.now
var ids: [String] = []
ids.reserveCapacity(memberCount)
var membersOfCity = [[Int32]](repeating: [], count: cityCount)
FileManager.default.createFile(atPath: folder.appendingPathComponent("candidates.tsv").path, contents: nil)
FileManager.default.createFile(atPath: folder.appendingPathComponent("points.tsv").path, contents: nil)
let candidatesFile = try FileHandle(forWritingTo: folder.appendingPathComponent("candidates.tsv"))
let pointsFile = try FileHandle(forWritingTo: folder.appendingPathComponent("points.tsv"))
var candidateLines = "", pointLines = ""
for n in 0..<memberCount {
    let (lat, lon) = cities[cityOf[n]]
    let latitude = lat + Double.random(in: -0.14...0.14, using: &random)
    let longitude = lon + Double.random(in: -0.2...0.2, using: &random)
    let cell = Geohash.encode(latitude: latitude, longitude: longitude, precision: 6)!
    let centre = Geohash.decode(cell)!
    let gender: Int32 = Int32.random(in: 1...2, using: &random)
    let wants: [Int32] = Int.random(in: 0..<10, using: &random) == 0 ? [1, 2] : [3 - gender]
    let age = Int32.random(in: 18...60, using: &random)
    let id = uuid(&random)
    ids.append(id)
    membersOfCity[cityOf[n]].append(Int32(n))
    var snapshot = Kindred.Common.V1.CandidateSnapshot()
    snapshot.userId = id
    snapshot.communityId = "bench"
    snapshot.eligible = true
    snapshot.birthDate = .with {
        $0.year = 2026 - age
        $0.month = 1
        $0.day = 1
    }
    snapshot.gender = .init(rawValue: gender)
    snapshot.interestedIn = wants.map { .init(rawValue: $0) }
    snapshot.ageMinYears = max(18, age - 8)
    snapshot.ageMaxYears = min(80, age + 8)
    snapshot.maxDistanceKm = 50
    snapshot.geohashCell = cell
    snapshot.version = 1
    snapshot.updatedUnixMs = 1_764_000_000_000 + Int64.random(in: 0...30_000_000_000, using: &random)
    candidateLines += "\(id)\tbench\t\\\\x\(hex(try snapshot.serializedBytes()))\t1\n"
    let wantBits = wants.reduce(0) { $0 | (1 << $1) }
    pointLines += "\(id)\t(\(centre.longitude),\(centre.latitude))\t\(1 << gender)\t\(wantBits)\t\(age)\t\(max(18, age - 8))\t\(min(80, age + 8))\n"
    if n % 50_000 == 49_999 || n == memberCount - 1 {
        candidatesFile.write(candidateLines.data(using: .utf8)!)
        pointsFile.write(pointLines.data(using: .utf8)!)
        candidateLines = ""
        pointLines = ""
    }
}
try candidatesFile.close()
try pointsFile.close()
FileManager.default.createFile(atPath: folder.appendingPathComponent("swipes.tsv").path, contents: nil)
let swipesFile = try FileHandle(forWritingTo: folder.appendingPathComponent("swipes.tsv"))
var swipeLines = ""
var swipeCount = 0
for city in 0..<cityCount {
    let members = membersOfCity[city]
    guard members.count > swipesPerMember + 1 else { continue }
    for (position, n) in members.enumerated() {
        var targets: Set<Int32> = []
        for k in 1...swipesPerMember {
            let target = members[(position + k * 7) % members.count]
            // Once per pair (in a small city the stride comes round again).
            guard target != n, targets.insert(target).inserted else { continue }
            let liked = Int.random(in: 0..<3, using: &random) == 0 ? "t" : "f"
            // The ranking features stored with a learned swipe (the rebuild replays the models from them).
            let features = withFeatures ? "{" + (0..<8).map { _ in String(Double(Int.random(in: 0...999, using: &random)) / 1000) }.joined(separator: ",") + "}" : "\\N"
            swipeLines += "\(ids[Int(n)])\t\(ids[Int(target)])\tbench\t\(uuid(&random))\t\(liked)\t\(features)\t0\t2026-11-24 00:00:00+00\n"
            swipeCount += 1
        }
        if swipeLines.utf8.count > 8_000_000 {
            swipesFile.write(swipeLines.data(using: .utf8)!)
            swipeLines = ""
        }
    }
}
swipesFile.write(swipeLines.data(using: .utf8)!)
try swipesFile.close()
membersOfCity = []
say("generated \(memberCount) members, \(swipeCount) swipes in \(seconds(since: started))")
if generateOnly {
    try (ids.joined(separator: "\n") + "\n").write(to: folder.appendingPathComponent("viewers.txt"), atomically: true, encoding: .utf8)
    exit(0)
}
let postgres = try await TestPostgres.shared()
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let url = try await postgres.createMigratedDatabase(
    schema: "discovery", migrations: root.appendingPathComponent("services/discovery/migrations").path)

// ---- COPY ----
func psql(_ command: String) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
    process.arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", command, url]
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw PostgresError(code: .queryFailed, reason: "psql failed") }
}
let copying = ContinuousClock.now
try psql("\\copy discovery.candidates (user_id, community_id, snapshot, version) FROM '\(folder.path)/candidates.tsv'")
try psql("\\copy discovery.swipes (viewer_id, target_id, community_id, swipe_id, liked, features, target_interests, swiped_at) FROM '\(folder.path)/swipes.tsv'")
say("COPY candidates + swipes: \(seconds(since: copying))")
let analysing = ContinuousClock.now
try psql("ANALYZE discovery.candidates; ANALYZE discovery.swipes")
say("ANALYZE: \(seconds(since: analysing))")
let gist = ContinuousClock.now
try psql("CREATE TABLE points (user_id uuid, p point, gender_bit int2, wants int2, age int2, age_min int2, age_max int2)")
try psql("\\copy points FROM '\(folder.path)/points.tsv'")
try psql("ALTER TABLE points ADD PRIMARY KEY (user_id); CREATE INDEX points_p ON points USING gist (p); ANALYZE points")
say("GiST table (COPY, index, analyze): \(seconds(since: gist))")

// ---- Rebuild through the service ----
var configuration = DiscoveryConfiguration()
configuration.database.url = url
configuration.rebuildPage = 50_000
configuration.database.poolSize = threads + 1
let baseline = residentMiB()
let server = try DiscoveryServer(
    configuration: configuration, auth: AuthConnection(fixedKeys: [:], logger: logger), logger: logger)
let rebuilding = ContinuousClock.now
let cpuBefore = cpuSeconds()
let indexed = try await server.service.rebuild(community: nil)
say("rebuild from PostgreSQL: \(indexed) members in \(seconds(since: rebuilding)) (\(String(format: "%.1f", cpuSeconds() - cpuBefore)) s of CPU in discovery), resident +\(Int(residentMiB() - baseline)) MiB, load average \(loadAverage())")

// ---- Decks in memory (what GetDeck does after the caller check) ----
let keys = ids.compactMap { UserKey(uuidString: $0) }
final class Results: @unchecked Sendable {
    var latencies: [[Double]]
    var empty: [Int]
    init(_ threads: Int) {
        self.latencies = Array(repeating: [], count: threads)
        self.empty = Array(repeating: 0, count: threads)
    }
}
func report(_ name: String, _ results: Results) {
    let all = results.latencies.flatMap { $0 }.sorted()
    func percentile(_ p: Double) -> Double { all[min(all.count - 1, Int(Double(all.count) * p))] }
    say(String(
        format: "%@: %d in %.0f s on %d threads: %.0f/s, p50 %.0f us, p99 %.0f us, p99.9 %.0f us, empty %d",
        name, all.count, seconds, threads, Double(all.count) / seconds, percentile(0.5), percentile(0.99),
        percentile(0.999), results.empty.reduce(0, +)))
}
let service = server.service
let deckResults = Results(threads)
let deckDeadline = ContinuousClock.now + .seconds(seconds)
DispatchQueue.concurrentPerform(iterations: threads) { worker in
    var random = Random(state: UInt64(worker) &+ 777)
    var latencies: [Double] = []
    var empty = 0
    while ContinuousClock.now < deckDeadline {
        for _ in 0..<100 {
            let viewer = keys[Int.random(in: 0..<keys.count, using: &random)]
            let start = ContinuousClock.now
            let page = (try? service.rankedDeck(for: viewer))?.ranked.prefix(20) ?? []
            latencies.append((ContinuousClock.now - start) / .microseconds(1))
            if page.isEmpty { empty += 1 }
        }
    }
    deckResults.latencies[worker] = latencies
    deckResults.empty[worker] = empty
}
report("decks (index)", deckResults)

// ---- The same query as PostgreSQL GiST KNN with the filters in WHERE ----
let knnResults = Results(threads)
let knnDeadline = ContinuousClock.now + .seconds(seconds)
let database = server.database
let frozenIDs = ids
let pool = configuration.deckPool
try await withThrowingTaskGroup(of: (Int, [Double], Int).self) { group in
    for worker in 0..<threads {
        group.addTask {
            var random = Random(state: UInt64(worker) &+ 999)
            var latencies: [Double] = []
            var empty = 0
            while ContinuousClock.now < knnDeadline {
                let viewer = frozenIDs[Int.random(in: 0..<frozenIDs.count, using: &random)]
                let start = ContinuousClock.now
                // The deck's query: the viewer by primary key, then the nearest compatible unseen members by the
                // GiST index (KNN order), the same filters as the index (mutual gender and age, within 50 km ≈
                // 0.45° — degrees, no PostGIS — minus anyone the viewer swiped), as many as a deck's pool. The
                // bounding box is an index condition: without it a viewer with fewer than a pool of compatible
                // members nearby makes the KNN scan walk the whole table (the distance test is only a filter).
                let rows = try await database.query(
                    """
                    SELECT c.user_id FROM public.points v, LATERAL (
                        SELECT p.user_id FROM public.points p
                        WHERE p.user_id <> v.user_id AND (p.gender_bit & v.wants) <> 0 AND (v.gender_bit & p.wants) <> 0
                          AND p.age BETWEEN v.age_min AND v.age_max AND v.age BETWEEN p.age_min AND p.age_max
                          AND p.p <@ box(point(v.p[0] - 0.45 / cosd(v.p[1]), v.p[1] - 0.45), point(v.p[0] + 0.45 / cosd(v.p[1]), v.p[1] + 0.45))
                          AND p.p <-> v.p < 0.45
                          AND NOT EXISTS (SELECT 1 FROM discovery.swipes s WHERE s.viewer_id = v.user_id AND s.target_id = p.user_id)
                        ORDER BY p.p <-> v.p LIMIT \(pool)) c
                    WHERE v.user_id = \(viewer)::uuid
                    """)
                latencies.append((ContinuousClock.now - start) / .microseconds(1))
                if rows.count == 0 { empty += 1 }
            }
            return (worker, latencies, empty)
        }
    }
    for try await (worker, latencies, empty) in group {
        knnResults.latencies[worker] = latencies
        knnResults.empty[worker] = empty
    }
}
report("GiST KNN (PostgreSQL)", knnResults)
await server.shutdown()
