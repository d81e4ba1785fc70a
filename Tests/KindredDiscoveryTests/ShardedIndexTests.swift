import Foundation
import KindredGeo
import Testing

@testable import KindredDiscovery

/// Discovery as geographic shards: the same population (same seed, same events in the same order) built into one
/// index and into three shard indexes must give every viewer, on the shard that owns their cell, the same deck —
/// mutual filters, widening, exclusions (swipes, passes, blocks) and ranking scores — and the same search.
@Suite("Discovery shards")
struct ShardedIndexTests {
    static let community = "c1"
    static let nowMinutes: Int32 = 29_000_000

    /// Twenty towns in a 13° × 25° area of Europe (about nine shard cells), each ±0.4°.
    static let towns: [(Double, Double)] = {
        var random = SplitMix(state: 101)
        return (0..<20).map { _ in (Double.random(in: 42.0...55.0, using: &random), Double.random(in: -5.0...20.0, using: &random)) }
    }()

    /// A member in one of the towns, radii 10–160 km.
    static func member(_ n: UInt64, _ random: inout SplitMix) -> IndexedMember {
        let town = Self.towns.randomElement(using: &random)!
        let lat = town.0 + Double.random(in: -0.4...0.4, using: &random)
        let lon = town.1 + Double.random(in: -0.4...0.4, using: &random)
        let gender = UInt8(1 + n % 2)
        let wants: UInt8 = Int.random(in: 0..<5, using: &random) == 0 ? 0 : UInt8(1 << (2 - n % 2))
        let born = Int32(1960 + Int.random(in: 0...45, using: &random)) * 10000 + 101
        let low = UInt8(Int.random(in: 18...30, using: &random))
        return IndexedMember(
            user: UserKey(high: 0x0190_0000_0000_7000, low: n), latitude: lat, longitude: lon, gender: gender,
            interestedIn: wants, birthDate: born, ageMin: low, ageMax: low + UInt8(Int.random(in: 5...40, using: &random)),
            radiusKm: UInt16([10, 25, 50, 80, 160].randomElement(using: &random)!), hideDistance: false,
            interests: InterestSet(bits: random.next() & random.next()), attributes: InterestSet(bits: random.next() & 0xff),
            lastActiveMinutes: nowMinutes - Int32.random(in: 0...20_000, using: &random), joinedMinutes: Int32(n))
    }

    /// What the events do to an index, in one fixed order: members placed, swipes learned with the features the
    /// index computes at that moment (as `DeliverEvents` does), blocks, a few members moving far away and back.
    static func build(_ shards: DiscoveryShards, members count: Int = 1200, swipes: Int = 6000) -> (DiscoveryIndex, [UserKey]) {
        var random = SplitMix(state: 29)
        let index = DiscoveryIndex(shards: shards)
        var users: [UserKey] = []
        for n in 1...UInt64(count) {
            let member = Self.member(n, &random)
            index.place(member, facts: MemberFacts(), community: Self.community)
            users.append(member.user)
        }
        for _ in 0..<swipes {
            let (v, t) = (users.randomElement(using: &random)!, users.randomElement(using: &random)!)
            let liked = Int.random(in: 0..<10, using: &random) < 4
            guard v != t else { continue }
            index.write(Self.community) { state in
                state.index.recordSwipe(viewer: v, target: t, liked: liked)
                if let (features, interests) = state.features(viewer: v, target: t, nowUnixMs: Int64(Self.nowMinutes) * 60_000) {
                    state.learn(viewer: v, target: t, features: features, interests: interests, liked: liked)
                }
            }
        }
        for _ in 0..<200 {
            let (a, b) = (users.randomElement(using: &random)!, users.randomElement(using: &random)!)
            if a != b { index.write(Self.community) { $0.index.block(a, b) } }
        }
        // Members who move across the area (another shard's cell, most likely), keeping their swipes and blocks.
        for n in stride(from: 7, to: count, by: 97) {
            var moved = Self.member(UInt64(n), &random)
            let town = Self.towns.randomElement(using: &random)!
            (moved.latitude, moved.longitude) = (town.0 + 0.1, town.1 - 0.1)
            index.place(moved, facts: MemberFacts(), community: Self.community)
        }
        return (index, users)
    }

    static func deck(_ index: DiscoveryIndex, _ viewer: UserKey, exclude: Set<UserKey> = []) throws -> DrawnDeck? {
        try index.read(Self.community) { state in
            try DiscoveryService.draw(
                viewer, in: state, filters: [], exclude: exclude, poolSize: 500, scanLimit: 20_000,
                today: CandidateIndexTests.today, nowMinutes: Self.nowMinutes)
        } ?? nil
    }

    static func search(_ index: DiscoveryIndex, _ viewer: UserKey) -> [IndexMatch] {
        index.read(Self.community) { state in
            let query = DeckQuery(limit: 200, radiusKm: 160, today: CandidateIndexTests.today, scanLimit: 20_000).following(.search)
            return state.index.candidates(for: viewer, query) ?? []
        } ?? []
    }

    @Test("Each shard follows the event bus under its own name, the one its schema has")
    func eachShardConsumesUnderItsOwnName() {
        var configuration = DiscoveryConfiguration()
        #expect(configuration.eventConsumer == "discovery")
        configuration.shards = DiscoveryShards(index: 0, count: 3)!
        #expect(configuration.eventConsumer == "discovery")
        configuration.shards = DiscoveryShards(index: 2, count: 3)!
        #expect(configuration.eventConsumer == "discovery_2")
    }

    @Test("Three shards answer every viewer's deck and search exactly as one index does")
    func threeShardsAnswerAsOne() throws {
        let (single, users) = Self.build(.single)
        let shards = (0..<3).map { Self.build(DiscoveryShards(index: $0, count: 3)!).0 }
        var served = [0, 0, 0]
        var compared = 0
        for viewer in users {
            let position = try #require(single.position(of: viewer))
            let owner = shards[0].shards.owner(latitude: position.latitude, longitude: position.longitude)
            served[owner] += 1
            let exclude: Set<UserKey> = Set(users.prefix(Int(viewer.low % 5)))
            let expected = try Self.deck(single, viewer, exclude: exclude)
            let actual = try Self.deck(shards[owner], viewer, exclude: exclude)
            #expect(actual?.ranked.map(\.match.user) == expected?.ranked.map(\.match.user), "deck of \(viewer)")
            #expect(actual?.ranked.map(\.score) == expected?.ranked.map(\.score))
            #expect(actual?.ranked.map(\.match.distanceKm) == expected?.ranked.map(\.match.distanceKm))
            #expect(actual?.radiusKm == expected?.radiusKm)
            #expect(actual?.widened == expected?.widened)
            #expect(Self.search(shards[owner], viewer).map(\.user) == Self.search(single, viewer).map(\.user))
            compared += expected?.ranked.count ?? 0
        }
        // Every shard serves viewers, the decks are not trivially empty, and each shard's walk meets fewer members.
        #expect(served.allSatisfy { $0 > 100 }, "viewers per shard: \(served)")
        #expect(compared > users.count * 4, "candidates compared: \(compared)")
        let walked = shards.map { shard in shard.read(Self.community) { $0.index.bucketedCount } ?? 0 }
        #expect(walked.allSatisfy { $0 < users.count }, "members in each shard's buckets: \(walked)")
    }

    @Test("A member within the reach of a cell is held by that cell's shard, at every latitude and across 180°")
    func holdsEveryoneInReach() {
        var random = SplitMix(state: 3)
        let reach = 170.0
        for _ in 0..<4000 {
            let lat = Double.random(in: -80...80, using: &random)
            let lon = Double.random(in: -180...180, using: &random)
            // A second point up to `reach` km away in any direction.
            let bearing = Double.random(in: 0..<(2 * .pi), using: &random)
            let km = Double.random(in: 0...reach, using: &random)
            let dLat = km * cos(bearing) / 111.2
            let otherLat = max(-89.9, min(89.9, lat + dLat))
            var otherLon = lon + km * sin(bearing) / (111.2 * cos(otherLat * .pi / 180))
            if otherLon > 180 { otherLon -= 360 }
            if otherLon < -180 { otherLon += 360 }
            guard Geohash.distanceKm((lat, lon), (otherLat, otherLon)) <= reach
            else { continue }
            for count in [2, 3, 7] {
                let owner = DiscoveryShards(index: 0, count: count)!.owner(latitude: otherLat, longitude: otherLon)
                let shard = DiscoveryShards(index: owner, count: count)!
                #expect(shard.holds(latitude: lat, longitude: lon, reachKm: reach), "\(lat),\(lon) → \(otherLat),\(otherLon)")
            }
        }
    }

    @Test("The shard setting: <index>/<count>, one shard by default, owners stable and spread")
    func settingAndOwners() {
        #expect(DiscoveryShards("1/3") == DiscoveryShards(index: 1, count: 3))
        for bad in ["3/3", "-1/3", "0/0", "1", "a/3", "1/3/4", "0/5000", ""] { #expect(DiscoveryShards(bad) == nil, "\(bad)") }
        #expect(!DiscoveryShards.single.isSharded)
        #expect(DiscoveryShards.single.owner(latitude: 52.5, longitude: 13.4) == 0)
        #expect(DiscoveryShards.single.holds(latitude: 52.5, longitude: 13.4, reachKm: 0))
        // The rule is FNV-1a of the cell text: fixed values, the same in every process.
        #expect(DiscoveryShards.shard(ofCell: "u0", count: 3) == DiscoveryShards.shard(ofCell: "u0", count: 3))
        var cells: [Int] = [0, 0, 0]
        for a in Array("0123456789bcdefghjkmnpqrstuvwxyz") {
            for b in Array("0123456789bcdefghjkmnpqrstuvwxyz") { cells[DiscoveryShards.shard(ofCell: "\(a)\(b)", count: 3)] += 1 }
        }
        #expect(cells.allSatisfy { $0 > 250 }, "cells per shard: \(cells)")
    }
}
