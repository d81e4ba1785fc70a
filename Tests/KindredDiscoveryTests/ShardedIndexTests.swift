import Foundation
import KindredGeo
import KindredProto
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

    /// A member in one of the towns, radii 10–100 km (within the community's widest radius, as profile requires).
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
            radiusKm: UInt16([10, 25, 50, 80, 100].randomElement(using: &random)!), hideDistance: false,
            interests: InterestSet(bits: random.next() & random.next()), attributes: InterestSet(bits: random.next() & 0xff),
            lastActiveMinutes: nowMinutes - Int32.random(in: 0...20_000, using: &random), joinedMinutes: Int32(n))
    }

    /// Far from the towns (another shard's cells, beyond every shard's reach of the towns): members who live there
    /// swipe on the towns' members and move into the towns and out again.
    static let faraway: [(Double, Double)] = [(35.7, 139.7), (40.7, -74.0), (-33.9, 151.2)]

    /// The projection's rows as the events leave them: every swipe and block (one index keeps them all; a shard
    /// keeps those of the members it owns and reads a member's rows back when they move into one of its cells).
    struct Projection {
        var swipes: [(viewer: UserKey, target: UserKey, liked: Bool)] = []
        var blocks: [(UserKey, UserKey)] = []
    }

    /// A filterable choice and words of a text attribute, as a community with attributes gives its members.
    static let fields = ["technology", "finance", "media", "energy"]
    static let words = ["acme", "labs", "capital", "studio", "group", "digital"]
    static func facts(_ n: UInt64) -> MemberFacts {
        MemberFacts(values: ["field": .choiceValue(Self.fields[Int(n % 4)])], words: [Self.words[Int(n % 6)]])
    }

    /// The community's rules: `field` filterable, decks reaching `maxRadiusKm` at most.
    static func rules(maxRadiusKm: Int) -> CommunityRules {
        var rules = CommunityRules()
        rules.maxRadiusKm = maxRadiusKm
        rules.filterable = ["field": .singleChoice]
        return rules
    }

    /// Places a member as `DiscoveryService.apply(.place)` does: with their swipes and blocks from the projection
    /// when `PendingChanges.needsRelations` says the index lacks them.
    static func place(_ member: IndexedMember, in index: DiscoveryIndex, projection: Projection) {
        let reload = PendingChanges().needsRelations(member, community: Self.community, in: index)
        index.place(member, facts: Self.facts(member.user.low), community: Self.community)
        guard reload else { return }
        index.write(Self.community) { state in
            for swipe in projection.swipes where swipe.viewer == member.user || swipe.target == member.user {
                state.index.recordSwipe(viewer: swipe.viewer, target: swipe.target, liked: swipe.liked)
            }
            for (a, b) in projection.blocks where a == member.user || b == member.user { state.index.block(a, b) }
        }
    }

    /// What the events do to an index, in one fixed order: members placed (a few far away), swipes learned with
    /// the features the index computes at that moment (as `DeliverEvents` does), blocks, members moving across the
    /// area (another shard's cell, most likely) and far-away members moving into the towns; more swipes, some
    /// between the far-away members and the towns' (regions of different shards); the far-away members leaving
    /// the towns again, and a few town members swiping between towns after that. With `widen`, the community's
    /// widest radius then grows from 100 to 160 km, as a CommunityUpdated does (`DiscoveryService.factsReached`:
    /// the members a shard's region reaches anew get their facts from the projection).
    static func build(
        _ shards: DiscoveryShards, members count: Int = 1200, swipes: Int = 6000, widen: Bool = true
    ) -> (DiscoveryIndex, [UserKey]) {
        var random = SplitMix(state: 29)
        let index = DiscoveryIndex(shards: shards)
        index.write(Self.community) { $0.rules = Self.rules(maxRadiusKm: 100) }
        var projection = Projection()
        var users: [UserKey] = []
        var members: [IndexedMember] = []
        for n in 1...UInt64(count) {
            var member = Self.member(n, &random)
            if n % 50 == 0 {
                let far = Self.faraway[Int(n / 50) % Self.faraway.count]
                (member.latitude, member.longitude) = (far.0 + Double(n % 7) * 0.01, far.1 - Double(n % 5) * 0.01)
            }
            Self.place(member, in: index, projection: projection)
            users.append(member.user)
            members.append(member)
        }
        func swipe(_ v: UserKey, _ t: UserKey, liked: Bool) {
            guard v != t else { return }
            projection.swipes.append((v, t, liked))
            index.write(Self.community) { state in
                state.index.recordSwipe(viewer: v, target: t, liked: liked)
                if let (features, interests) = state.features(viewer: v, target: t, nowUnixMs: Int64(Self.nowMinutes) * 60_000) {
                    state.learn(viewer: v, target: t, features: features, interests: interests, liked: liked)
                }
            }
        }
        for _ in 0..<swipes {
            let (v, t) = (users.randomElement(using: &random)!, users.randomElement(using: &random)!)
            swipe(v, t, liked: Int.random(in: 0..<10, using: &random) < 4)
        }
        for _ in 0..<200 {
            let (a, b) = (users.randomElement(using: &random)!, users.randomElement(using: &random)!)
            guard a != b else { continue }
            projection.blocks.append((a, b))
            index.write(Self.community) { $0.index.block(a, b) }
        }
        // Members who move across the area, keeping their swipes and blocks; the far-away ones come to the towns.
        var moved: [Int] = Array(stride(from: 7, to: count, by: 97))
        moved += stride(from: 49, to: count, by: 50)
        for n in moved {
            var member = members[n]
            let town = Self.towns.randomElement(using: &random)!
            (member.latitude, member.longitude) = (town.0 + 0.1, town.1 - 0.1)
            Self.place(member, in: index, projection: projection)
        }
        // Swipes of and on the movers, and between far-away members and the towns.
        for _ in 0..<1500 {
            let mover = users[moved.randomElement(using: &random)!]
            let other = users.randomElement(using: &random)!
            let liked = Bool.random(using: &random)
            if Bool.random(using: &random) { swipe(mover, other, liked: liked) } else { swipe(other, mover, liked: liked) }
        }
        // The far-away members go home (out of the towns' shards' reach) and a third of them come back.
        for n in stride(from: 49, to: count, by: 50) {
            Self.place(members[n], in: index, projection: projection)
        }
        for _ in 0..<500 {
            let (v, t) = (users.randomElement(using: &random)!, users[Int.random(in: 0..<24, using: &random) * 50 + 49])
            swipe(v, t, liked: Bool.random(using: &random))
        }
        for n in stride(from: 49, to: count, by: 150) {
            var member = members[n]
            let town = Self.towns.randomElement(using: &random)!
            (member.latitude, member.longitude) = (town.0 - 0.1, town.1 + 0.1)
            Self.place(member, in: index, projection: projection)
        }
        if widen {
            let moved: [UserKey: (latitude: Double, longitude: Double)?] = [:]
            let reached = index.read(Self.community) { state in
                state.reached(
                    before: IndexRegion(shards: shards, maxRadiusKm: 100), after: IndexRegion(shards: shards, maxRadiusKm: 160),
                    moved: moved)
            } ?? []
            index.write(Self.community) { $0.rules = Self.rules(maxRadiusKm: 160) }
            index.write(Self.community) { state in
                for user in reached where state.index.isHeld(user) { state.facts[user] = Self.facts(user.low) }
            }
        }
        return (index, users)
    }

    /// The viewer's deck; every third viewer filters on `field`.
    static func deck(_ index: DiscoveryIndex, _ viewer: UserKey, exclude: Set<UserKey> = []) throws -> DrawnDeck? {
        let filters: [Kindred.Common.V1.AttributeFilter] =
            viewer.low % 3 == 0
            ? [.with { $0.key = "field"; $0.condition = .anyOf(.with { $0.values = Array(Self.fields.prefix(2)) }) }] : []
        return try index.read(Self.community) { state in
            try DiscoveryService.draw(
                viewer, in: state, filters: filters, exclude: exclude, poolSize: 500, scanLimit: 20_000,
                today: CandidateIndexTests.today, nowMinutes: Self.nowMinutes)
        } ?? nil
    }

    /// The viewer's search to the community's widest radius; every fourth viewer's for a word of a text attribute.
    static func search(_ index: DiscoveryIndex, _ viewer: UserKey) -> [IndexMatch] {
        index.read(Self.community) { state in
            let (facts, word) = (state.facts, Self.words[Int(viewer.low % 6)])
            let accept: (@Sendable (UserKey) -> Bool)? =
                viewer.low % 4 == 0 ? { @Sendable user in facts[user]?.words.contains(word) ?? false } : nil
            let query = DeckQuery(
                limit: 200, radiusKm: state.rules.maxRadiusKm, today: CandidateIndexTests.today, scanLimit: 20_000, accept: accept
            ).following(.search)
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

    // Serialized, and yielding once per viewer: each case is tens of seconds of computation, and the two at once held
    // both threads of the cooperative pool, so calls elsewhere in a parallel run missed their connect deadlines.
    @Test(
        "Three shards answer every viewer's deck and search exactly as one index does, with a fraction of its swipes",
        .serialized, arguments: [false, true])
    func threeShardsAnswerAsOne(widen: Bool) async throws {
        let (single, users) = Self.build(.single, widen: widen)
        let shards = (0..<3).map { Self.build(DiscoveryShards(index: $0, count: 3)!, widen: widen).0 }
        var served = [0, 0, 0]
        var compared = 0
        for viewer in users {
            await Task.yield()
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
            // What a viewer's cards and held pages ask about anyone (profile's card check, GetDeck's later pages).
            // Every fourth viewer against everyone, one read of each index: every pair of 1,200 members, a read
            // each, made this test minutes of CPU in a debug build.
            guard viewer.low % 4 == 0 else { continue }
            func relations(_ index: DiscoveryIndex) -> [Bool] {
                index.read(Self.community) { state in
                    users.flatMap { other in
                        [state.index.hasLiked(other, viewer), state.index.isStillUnseen(viewer: viewer, target: other)]
                    }
                } ?? []
            }
            let (one, owned) = (relations(single), relations(shards[owner]))
            let differing = zip(one, owned).filter { $0 != $1 }.count
            #expect(differing == 0 && one.count == users.count * 2, "likes and unseen of \(viewer) differ for \(differing)")
        }
        // The same model everywhere: every member's state and the population slopes.
        for shard in shards {
            let models = users.filter { user in
                shard.read(Self.community) { $0.modelForTests(user) }! != single.read(Self.community) { $0.modelForTests(user) }!
            }
            #expect(models.isEmpty, "models differ for \(models.count) members")
        }
        // Every shard serves viewers, the decks are not trivially empty, and each shard's walk meets fewer members.
        #expect(served.allSatisfy { $0 > 100 }, "viewers per shard: \(served)")
        #expect(compared > users.count * 3, "candidates compared: \(compared)")
        let walked = shards.map { shard in shard.read(Self.community) { $0.index.bucketedCount } ?? 0 }
        #expect(walked.allSatisfy { $0 < users.count }, "members in each shard's buckets: \(walked)")
        // Each shard keeps only the swipes and blocks of the members it owns: fewer than one index, and each at
        // least once somewhere.
        let edges = shards.map { shard in shard.read(Self.community) { $0.index.edgeCount } ?? 0 }
        let all = single.read(Self.community) { $0.index.edgeCount } ?? 0
        #expect(edges.allSatisfy { $0 < all }, "swipe and block entries per shard: \(edges) of \(all)")
        #expect(edges.reduce(0, +) >= all, "swipe and block entries per shard: \(edges) of \(all)")
    }

    @Test("A rebuild numbers every shard's slots as one index does, so the taste directions are the same")
    func rebuildNumbersSlotsAsOne() {
        // As `DiscoveryService.rebuild` loads the members: a fresh state with the replica's shards applied, every
        // member upserted, slots arranged by place, then the taste directions estimated from the members.
        func rebuilt(_ shards: DiscoveryShards) -> CommunityState {
            var random = SplitMix(state: 29)
            var state = CommunityState(rules: Self.rules(maxRadiusKm: 100))
            state.applyShards(shards)
            for n in 1...UInt64(1200) {
                var member = Self.member(n, &random)
                if n % 50 == 0 { (member.latitude, member.longitude) = Self.faraway[Int(n / 50) % Self.faraway.count] }
                state.upsert(member, facts: Self.facts(n))
            }
            state.arrangeByPlace()
            state.refreshTasteBasis()
            return state
        }
        let single = rebuilt(.single)
        for shard in 0..<3 {
            let state = rebuilt(DiscoveryShards(index: shard, count: 3)!)
            #expect(state.index.bucketedCount < single.index.bucketedCount)
            #expect(state.index.users == single.index.users, "slots of shard \(shard)")
            #expect(state.recommender.basis == single.recommender.basis, "taste directions of shard \(shard)")
        }
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
