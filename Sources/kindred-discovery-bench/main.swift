import Dispatch
import Foundation
import KindredDiscovery
import KindredGeo
import KindredProto

// Deck speed of discovery's in-memory index at scale (issue 12): generates N members (default 5,000,000) in
// cities of Zipf-like sizes, S swipes each, builds the index, then runs decks (scan the covering cells for a
// pool of compatible unseen candidates with the service's default pool of 500 and scan limit, rank the pool
// with the reciprocal model, keep a page of 20) from W threads for D seconds. Prints build time, resident
// memory, a fingerprint of 2,000 fixed viewers' rankings (equal = identical decks), decks/s and latency
// percentiles. The pool size (default the service's 500) and whether slots are renumbered by place as a rebuild
// does (`arrangeByPlace`, default 1; 0 = slots in order of arrival) can be given.
// With a shard count (default 1), each geographic shard is measured in turn as one discovery replica of that many
// runs it (`DiscoveryShards`, `IndexRegion`: its buckets hold the members its cells reach), with decks for the
// viewers it owns only; the sum is what that many replicas serve on machines of their own.
// With a shard to build as well (`only`), the process builds that shard alone as its replica does (the region set
// before the members go in, so it keeps only the swipes of the members it owns) and reports its resident memory
// next to one index's: run it once per shard, and once without, to compare the memory of N shards with one index.
// Resident memory is reported by part: the members (slots and buckets), their swipe lists, the models.
// Usage: kindred-discovery-bench [members] [swipes per member] [seconds] [threads] [pools, e.g. 100,200,500] [arrange 1|0] [shards] [only]
let arguments = Array(CommandLine.arguments.dropFirst())
let memberCount = arguments.count > 0 ? Int(arguments[0]) ?? 5_000_000 : 5_000_000
let swipesPerMember = arguments.count > 1 ? Int(arguments[1]) ?? 10 : 10
let seconds = arguments.count > 2 ? Double(arguments[2]) ?? 10 : 10
let threads = arguments.count > 3 ? Int(arguments[3]) ?? 2 : 2
/// Pool sizes to measure one after the other on the same index ("100,200,500"); the fingerprint uses the first.
let poolSizes = arguments.count > 4 ? arguments[4].split(separator: ",").compactMap { Int($0) } : [DiscoveryConfiguration().deckPool]
let poolSize = poolSizes.first ?? DiscoveryConfiguration().deckPool
let arrange = arguments.count > 5 ? arguments[5] != "0" : true
let shardCount = arguments.count > 6 ? max(1, Int(arguments[6]) ?? 1) : 1
/// The one shard this process builds and measures (nil: one index, each shard's region applied to it in turn).
let onlyShard = arguments.count > 7 ? Int(arguments[7]).flatMap { DiscoveryShards(index: $0, count: shardCount) } : nil
/// Whether members carry filter facts as in the bizmatch preset (a business field, a role, years of experience and
/// a company's words), kept for the members the index's region holds (everyone in one index).
let withFacts = arguments.count > 8 && arguments[8] == "1"

func residentMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Double(line.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? 0) / 1024
    }
    return 0
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

var random = Random(state: 12345)
let baseline = residentMiB()
let cityCount = 400
// Cities spread over the populated latitudes, sizes ∝ 1/rank (the largest ~60k members at 5M).
let cities = (0..<cityCount).map { _ in
    (Double.random(in: -40...60, using: &random), Double.random(in: -120...150, using: &random))
}
let harmonic = (1...cityCount).reduce(0.0) { $0 + 1 / Double($1) }
var cityOf: [Int] = []
cityOf.reserveCapacity(memberCount)
for city in 0..<cityCount {
    let size = Int(Double(memberCount) / (harmonic * Double(city + 1)))
    cityOf.append(contentsOf: repeatElement(city, count: size))
}
while cityOf.count < memberCount { cityOf.append(Int.random(in: 0..<cityCount, using: &random)) }

func snap(_ value: Double, _ step: Double) -> Double { (value / step).rounded(.down) * step + step / 2 }
let started = ContinuousClock.now
var index = CommunityIndex()
if let onlyShard { index.setRegion(IndexRegion(shards: onlyShard, maxRadiusKm: 160)) }
var users: [UserKey] = []
users.reserveCapacity(memberCount)
var membersOfCity = [[Int32]](repeating: [], count: cityCount)
for n in 0..<memberCount {
    let (lat, lon) = cities[cityOf[n]]
    // ~15 km spread, then the precision-6 cell centre (0.0055° × 0.011°).
    let latitude = snap(lat + Double.random(in: -0.14...0.14, using: &random), 180.0 / 32768)
    let longitude = snap(lon + Double.random(in: -0.2...0.2, using: &random), 360.0 / 32768)
    let gender = UInt8.random(in: 1...2, using: &random)
    let wants: UInt8 = Int.random(in: 0..<10, using: &random) == 0 ? 0b110 : 1 << (3 - gender)
    let age = Int32.random(in: 18...60, using: &random)
    let user = UserKey(high: random.next(), low: UInt64(n))
    users.append(user)
    index.upsert(
        IndexedMember(
            user: user, latitude: latitude, longitude: longitude, gender: gender, interestedIn: wants,
            birthDate: (2026 - age) * 10000 + 101, ageMin: UInt8(max(18, age - 8)), ageMax: UInt8(min(80, age + 8)),
            radiusKm: 50, hideDistance: false, interests: InterestSet(bits: random.next() & random.next() & random.next()),
            attributes: InterestSet(), lastActiveMinutes: Int32.random(in: 29_000_000...29_500_000, using: &random),
            joinedMinutes: 28_000_000
        )
    )
    membersOfCity[cityOf[n]].append(Int32(n))  // member numbers (the slots change when arranged)
}
// As a rebuild does once its members are in: slots by place (member n keeps its key; slots change).
if arrange { index.arrangeByPlace() }
let indexed = ContinuousClock.now
let residentMembers = residentMiB() - baseline
var swipeCount = 0
// As a rebuild loads them: collected as slot pairs, each member's lists built once (`CommunityIndex.load`).
var swipes = SlotSwipes()
for n in 0..<memberCount {
    let neighbours = membersOfCity[cityOf[n]]
    for _ in 0..<swipesPerMember {
        let target = Int(neighbours[Int.random(in: 0..<neighbours.count, using: &random)])
        guard target != n else { continue }
        swipes.append(
            viewer: index.slot(of: users[n])!, target: index.slot(of: users[target])!,
            liked: Int.random(in: 0..<3, using: &random) == 0)
        swipeCount += 1
    }
}
index.load(swipes: swipes, blocks: [])
swipes = SlotSwipes()
let residentLists = residentMiB() - baseline - residentMembers
// Every member's model state as after their swipes (likes, swipes given and received), 32 bytes each.
var models = Recommender()
models.refreshTasteBasis(from: users.prefix(50_000).compactMap { index.interests(of: $0) })
for n in 0..<memberCount {
    var state = MemberState()
    state.swipesGiven = Float(Int.random(in: 0...40, using: &random))
    state.likesGiven = (state.swipesGiven * Float.random(in: 0.1...0.6, using: &random)).rounded()
    state.swipesReceived = Float(Int.random(in: 0...40, using: &random))
    state.surplusReceived = state.swipesReceived * Float.random(in: -0.3...0.3, using: &random)
    state.taste = SIMD4(repeating: 0.1) * Float.random(in: -1...1, using: &random) * state.swipesGiven
    models.setState(state, of: Int(index.slot(of: users[n])!))
}
let built = ContinuousClock.now
membersOfCity = []
cityOf = []
let residentModels = residentMiB() - baseline - residentMembers - residentLists
// Facts as a community with filterable attributes keeps them (`CommunityState.facts`), for the members held.
var facts: [UserKey: MemberFacts] = [:]
if withFacts {
    let fields = ["technology", "finance", "healthcare", "retail", "energy", "media", "education", "real_estate"]
    let words = ["acme", "labs", "capital", "systems", "group", "partners", "studio", "ventures", "holdings", "digital"]
    for (n, user) in users.enumerated() where index.isHeld(user) {
        facts[user] = MemberFacts(
            values: [
                "business_field": .choiceValue(fields[n % fields.count]), "role": .choiceValue(n % 3 == 0 ? "investor" : "startup"),
                "years_experience": .integerValue(Int64(n % 40)),
            ],
            words: [words[n % words.count], words[(n / 10) % words.count]])
    }
}
let residentFacts = residentMiB() - baseline - residentMembers - residentLists - residentModels
print("members \(memberCount), swipes \(swipeCount), index \(String(format: "%.1f", (indexed - started) / .seconds(1))) s + swipes \(String(format: "%.1f", (built - indexed) / .seconds(1))) s, resident \(Int(residentMiB() - baseline)) MiB")
print(String(
    format: "resident by part: members (slots, buckets) %.0f MiB, swipe lists %.0f MiB (%d entries), models %.0f MiB, facts %.0f MiB (%d members)",
    residentMembers, residentLists, index.edgeCount, residentModels, residentFacts, facts.count)
    + (onlyShard.map { ", built as shard \($0): \(index.bucketedCount) members in its buckets" } ?? ", one index"))

let frozenIndex = index
let frozenModels = models
let frozenUsers = users
final class Results: @unchecked Sendable {
    var latencies: [[Double]]
    var empty: [Int]
    init(_ threads: Int) {
        latencies = Array(repeating: [], count: threads)
        empty = Array(repeating: 0, count: threads)
    }
}
// The service's pool and scan limit (DiscoveryConfiguration defaults), so the figure is GetDeck's draw.
let configuration = DiscoveryConfiguration()
let deckQuery = DeckQuery(limit: poolSize, today: 20261124, scanLimit: configuration.scanLimit)
// A fingerprint of 2,000 fixed viewers' whole rankings (user, km, score, order): equal before and after a
// change of the index's internals means the decks are identical. Per shard, of those the shard owns (equal in a
// shard built alone and in one index: the shard answers its viewers as one index does).
func fingerprint(_ index: CommunityIndex, owner: DiscoveryShards? = nil) -> String {
    var fingerprint: UInt64 = 0xcbf2_9ce4_8422_2325
    for n in stride(from: 0, to: frozenUsers.count, by: max(1, frozenUsers.count / 2000)) {
        let viewer = frozenUsers[n]
        if let owner, let position = index.position(of: viewer),
            owner.owner(latitude: position.latitude, longitude: position.longitude) != owner.index
        {
            continue
        }
        let ranked = index.rank(
            index.candidates(for: viewer, deckQuery) ?? [], viewer: viewer, recommender: frozenModels, nowMinutes: 29_500_000)
        for entry in ranked {
            for word in [entry.match.user.high, entry.match.user.low, UInt64(entry.match.distanceKm), UInt64(entry.score.bitPattern)] {
                fingerprint = (fingerprint ^ word) &* 0x100_0000_01b3
            }
        }
        fingerprint = (fingerprint ^ UInt64(ranked.count)) &* 0x100_0000_01b3
    }
    return String(fingerprint, radix: 16)
}
if let onlyShard {
    print("rankings fingerprint of shard \(onlyShard)'s viewers \(fingerprint(frozenIndex, owner: onlyShard))")
} else {
    print("rankings fingerprint \(fingerprint(frozenIndex))")
    for shard in 0..<(shardCount > 1 ? shardCount : 0) {
        let shards = DiscoveryShards(index: shard, count: shardCount)!
        print("rankings fingerprint of shard \(shards)'s viewers \(fingerprint(frozenIndex, owner: shards))")
    }
}
/// Decks/s of one replica: `index` (the shard's region applied) drawing for `viewers` on `threads` threads.
func measure(_ frozenIndex: CommunityIndex, viewers frozenUsers: [UserKey], pool: Int, label: String) -> Double {
    let results = Results(threads)
    let deadline = ContinuousClock.now + .seconds(seconds)
    let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?"
    DispatchQueue.concurrentPerform(iterations: threads) { worker in
        var random = Random(state: UInt64(worker) &+ 777)
        var latencies: [Double] = []
        var empty = 0
        var query = deckQuery
        query.limit = pool
        while ContinuousClock.now < deadline {
            for _ in 0..<100 {
                let viewer = frozenUsers[Int.random(in: 0..<frozenUsers.count, using: &random)]
                let start = ContinuousClock.now
                let pool = frozenIndex.candidates(for: viewer, query) ?? []
                let ranked = frozenIndex.rank(pool, viewer: viewer, recommender: frozenModels, nowMinutes: 29_500_000)
                let page = ranked.prefix(20)
                latencies.append((ContinuousClock.now - start) / .microseconds(1))
                if page.isEmpty { empty += 1 }
            }
        }
        results.latencies[worker] = latencies
        results.empty[worker] = empty
    }
    let all = results.latencies.flatMap { $0 }.sorted()
    func percentile(_ p: Double) -> Double { all[min(all.count - 1, Int(Double(all.count) * p))] }
    print(String(
        format: "pool %d, arranged %d, load \(load): decks %d in %.0f s on %d threads: %.0f decks/s, p50 %.0f us, p99 %.0f us, p99.9 %.0f us, empty %d",
        pool, arrange ? 1 : 0, all.count, seconds, threads, Double(all.count) / seconds, percentile(0.5), percentile(0.99), percentile(0.999),
        results.empty.reduce(0, +)
    ) + label)
    return Double(all.count) / seconds
}
for pool in poolSizes {
    if let onlyShard {
        let viewers = frozenUsers.filter { user in
            frozenIndex.position(of: user).map { onlyShard.owner(latitude: $0.latitude, longitude: $0.longitude) == onlyShard.index } ?? false
        }
        _ = measure(frozenIndex, viewers: viewers, pool: pool, label: ", shard \(onlyShard) built alone: \(viewers.count) viewers")
        continue
    }
    guard shardCount > 1 else {
        _ = measure(frozenIndex, viewers: frozenUsers, pool: pool, label: "")
        continue
    }
    var total = 0.0
    for shard in 0..<shardCount {
        let shards = DiscoveryShards(index: shard, count: shardCount)!
        var regional = frozenIndex
        regional.setRegion(IndexRegion(shards: shards, maxRadiusKm: 160))
        let viewers = frozenUsers.filter { user in
            regional.position(of: user).map { shards.owner(latitude: $0.latitude, longitude: $0.longitude) == shard } ?? false
        }
        total += measure(
            regional, viewers: viewers, pool: pool,
            label: ", shard \(shards): \(viewers.count) viewers, \(regional.bucketedCount) members in its buckets")
    }
    print(String(format: "pool %d, %d shards: %.0f decks/s in all (each shard on machines of its own)", pool, shardCount, total))
}
