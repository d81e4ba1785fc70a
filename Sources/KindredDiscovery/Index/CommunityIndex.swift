import Foundation
import KindredServiceKit

/// The fields of a member that both sides' filters test, together (12 bytes: one read per examined member).
struct FilterCard: Sendable {
    /// yyyymmdd.
    var birthDate: Int32
    var gender: UInt8
    var interestedIn: UInt8
    var ageMin: UInt8
    var ageMax: UInt8
    var radiusKm: UInt16
}

/// A slot in its cell's bucket, with the card the walk tests (16 bytes).
struct BucketEntry: Sendable {
    var slot: Int32
    var card: FilterCard
}

/// The in-memory candidate index of one community (DESIGN §4): every eligible member's coarse cell and filter
/// fields in flat arrays indexed by a dense slot, buckets of slots per precision-5 geohash cell, and who
/// swiped, passed or blocked whom, so that a deck needs no call to another service and no query to
/// PostgreSQL (which stays the source of truth; the index is rebuilt from it at start).
///
/// Not thread-safe: the service's `DiscoveryIndex` guards it with a readers-writer lock. Removing a member frees the slot for reuse.
public struct CommunityIndex: Sendable {
    // Per slot (struct of arrays: the scan touches only the fields it tests).
    private(set) var users: [UserKey] = []
    private var latitudes: [Double] = []
    /// Published positions (longitude and the latitude's sine and cosine together: the distance test reads them at once).
    private var geo: [PublishedPoint] = []
    /// The mutual filter fields and the radius, 12 bytes per slot (the viewer's own, ranking's birth years); the walk
    /// reads the copy in the member's bucket entry, which `upsert` writes from this one.
    private var cards: [FilterCard] = []
    private var hidesDistance: [Bool] = []
    private(set) var interests: [InterestSet] = []
    private(set) var attributes: [InterestSet] = []
    private(set) var lastActive: [Int32] = []
    private(set) var joined: [Int32] = []
    private var live: [Bool] = []
    private var bucketOf: [UInt32] = []
    private var positionInBucket: [Int32] = []
    /// Slots each member swiped, and slots that passed on each member (kept sorted, small per member).
    private var swiped: [[Int32]] = []
    private var passedOn: [[Int32]] = []
    /// Slots that liked each member (sorted): read only when the member's slot is freed, to take the likes it
    /// received out of the likers' `swiped`, so that whoever gets the slot next is not hidden from them.
    private var likedBy: [[Int32]] = []
    /// Blocks in either direction, per slot.
    private var blocked: [[Int32]] = []
    /// Whether the member's published position lies in a cell this replica owns (`DiscoveryShards`): only then can
    /// they be a viewer here. A swipe or block is kept only when one of its two members is owned (`keepsEdge`):
    /// every lookup of these lists names the viewer, and the other pairs are another shard's.
    private var owned: [Bool] = []

    /// Per precision-5 cell, its members' slots with a copy of their filter card: a deck reads a cell's members
    /// in sequence, and most fail the mutual filters without the walk touching any per-slot array (a cache miss
    /// per examined member was most of a deck's time at 5M members).
    private var buckets: [UInt32: [BucketEntry]] = [:]
    private var slotOf: [UserKey: Int32] = [:]
    private var freeSlots: [Int32] = []

    public init() {}

    /// Members currently indexed.
    public var count: Int { slotOf.count }

    public func slot(of user: UserKey) -> Int32? { slotOf[user] }

    /// Inserts or replaces a member (an eligible snapshot). Swipes and blocks recorded for the user stay.
    @discardableResult
    public mutating func upsert(_ member: IndexedMember) -> Int32 {
        let slot: Int32
        if let existing = slotOf[member.user] {
            slot = existing
            removeFromBucket(slot)
        } else if let free = freeSlots.popLast() {
            slot = free
            slotOf[member.user] = slot
        } else {
            slot = Int32(users.count)
            slotOf[member.user] = slot
            appendEmptySlot()
        }
        let i = Int(slot)
        users[i] = member.user
        latitudes[i] = member.latitude
        geo[i] = PublishedPoint(latitude: member.latitude, longitude: member.longitude)
        cards[i] = FilterCard(
            birthDate: member.birthDate, gender: member.gender, interestedIn: member.interestedIn,
            ageMin: member.ageMin, ageMax: member.ageMax, radiusKm: member.radiusKm)
        hidesDistance[i] = member.hideDistance
        interests[i] = member.interests
        attributes[i] = member.attributes
        lastActive[i] = member.lastActiveMinutes
        joined[i] = member.joinedMinutes
        live[i] = true
        bucketOf[i] = GeoCell.bucketKey(latitude: member.latitude, longitude: member.longitude)
        if self.region.holds(latitude: member.latitude, longitude: member.longitude) { self.addToBucket(slot) }
        let wasOwned = owned[i]
        owned[i] = self.region.owns(latitude: member.latitude, longitude: member.longitude)
        if wasOwned, !owned[i] { self.dropUnownedEdges(of: slot) }
        return slot
    }

    /// Whether `user` is indexed at a position this replica owns (always, with one shard). A member who becomes
    /// owned by moving needs their swipes and blocks with unowned members back from the projection
    /// (`DiscoveryIndex.needsRelations`).
    public func isOwned(_ user: UserKey) -> Bool { slotOf[user].map { owned[Int($0)] } ?? false }

    /// Whether a swipe or block between two slots is kept here: one of them is owned.
    @inline(__always)
    private func keepsEdge(_ a: Int32, _ b: Int32) -> Bool { owned[Int(a)] || owned[Int(b)] }

    /// Forgets a slot's swipes and blocks with members this replica does not own (the slot is not owned either).
    private mutating func dropUnownedEdges(of slot: Int32) {
        let i = Int(slot)
        for other in swiped[i] where !owned[Int(other)] {
            Self.removeSorted(slot, from: &passedOn[Int(other)])
            Self.removeSorted(slot, from: &likedBy[Int(other)])
        }
        for other in passedOn[i] where !owned[Int(other)] { Self.removeSorted(slot, from: &swiped[Int(other)]) }
        for other in likedBy[i] where !owned[Int(other)] { Self.removeSorted(slot, from: &swiped[Int(other)]) }
        for other in blocked[i] where !owned[Int(other)] { Self.removeSorted(slot, from: &blocked[Int(other)]) }
        swiped[i].removeAll { !owned[Int($0)] }
        passedOn[i].removeAll { !owned[Int($0)] }
        likedBy[i].removeAll { !owned[Int($0)] }
        blocked[i].removeAll { !owned[Int($0)] }
    }

    /// Swipes and blocks held (each counted once per list entry; the memory the lists take).
    public var edgeCount: Int {
        [swiped, passedOn, likedBy, blocked].reduce(0) { total, lists in total + lists.reduce(0) { $0 + $1.count } }
    }

    /// The members decks may walk: with several discovery shards, only those a viewer in one of this replica's
    /// cells can reach (`IndexRegion`); everyone else keeps their slot, facts and swipes (the models learn from
    /// the whole community) but is in no bucket.
    public private(set) var region = IndexRegion.everywhere

    /// Puts the members the new region holds into their buckets and takes the others out. Buckets wholly inside
    /// the region keep their order (decks are unchanged). A replica's shards are set once, on a fresh state or
    /// from one shard to its own (the reach changes with the rules): the swipes and blocks of members it does not
    /// own are then dropped, and none is ever needed back.
    public mutating func setRegion(_ region: IndexRegion) {
        guard region != self.region else { return }
        let shardsChanged = region.shards != self.region.shards
        precondition(!shardsChanged || !self.region.shards.isSharded, "a replica's shards are set once")
        self.region = region
        if shardsChanged {
            for slot in self.slotOf.values {
                self.owned[Int(slot)] = region.owns(latitude: latitudes[Int(slot)], longitude: geo[Int(slot)].longitude)
            }
            for slot in self.slotOf.values where !self.owned[Int(slot)] { self.dropUnownedEdges(of: slot) }
        }
        for slot in self.slotOf.values.sorted() {
            let i = Int(slot)
            let held = region.holds(latitude: latitudes[i], longitude: geo[i].longitude)
            if held, positionInBucket[i] < 0 {
                self.addToBucket(slot)
            } else if !held, positionInBucket[i] >= 0 {
                self.removeFromBucket(slot)
            }
        }
    }

    /// Members in the buckets (those the region holds).
    public var bucketedCount: Int { buckets.values.reduce(0) { $0 + $1.count } }

    /// Calls `body` with every indexed member and their published position.
    func forEachMember(_ body: (UserKey, Double, Double) -> Void) {
        for (user, slot) in slotOf { body(user, latitudes[Int(slot)], geo[Int(slot)].longitude) }
    }

    /// Whether `user` is indexed and in the region's buckets: a member a deck, search or check here can meet.
    public func isHeld(_ user: UserKey) -> Bool { slotOf[user].map { positionInBucket[Int($0)] >= 0 } ?? false }

    /// A member's published position (latitude, longitude), nil when not indexed.
    public func position(of user: UserKey) -> (latitude: Double, longitude: Double)? {
        slotOf[user].map { (latitudes[Int($0)], geo[Int($0)].longitude) }
    }

    private mutating func addToBucket(_ slot: Int32) {
        let i = Int(slot)
        let key = bucketOf[i]
        positionInBucket[i] = Int32(buckets[key, default: []].count)
        buckets[key, default: []].append(BucketEntry(slot: slot, card: cards[i]))
    }

    /// Removes a member (ineligible, deactivated, deleted). Their swipes are forgotten too: a removed member
    /// who comes back gets them back from PostgreSQL (the service replays the user's swipes and blocks).
    @discardableResult
    public mutating func remove(_ user: UserKey) -> Bool {
        guard let slot = slotOf.removeValue(forKey: user) else { return false }
        let i = Int(slot)
        removeFromBucket(slot)
        live[i] = false
        for other in swiped[i] {
            Self.removeSorted(slot, from: &passedOn[Int(other)])
            Self.removeSorted(slot, from: &likedBy[Int(other)])
        }
        for other in passedOn[i] { Self.removeSorted(slot, from: &swiped[Int(other)]) }
        for other in likedBy[i] { Self.removeSorted(slot, from: &swiped[Int(other)]) }
        for other in blocked[i] { Self.removeSorted(slot, from: &blocked[Int(other)]) }
        swiped[i] = []
        passedOn[i] = []
        likedBy[i] = []
        blocked[i] = []
        freeSlots.append(slot)
        return true
    }

    /// Records a swipe between indexed members; a pass also hides the viewer from the swiper's target
    /// (nobody is shown someone who passed on them).
    public mutating func recordSwipe(viewer: UserKey, target: UserKey, liked: Bool) {
        guard let v = slotOf[viewer], let t = slotOf[target], keepsEdge(v, t) else { return }
        Self.insertSorted(t, into: &swiped[Int(v)])
        if liked {
            Self.insertSorted(v, into: &likedBy[Int(t)])
        } else {
            Self.insertSorted(v, into: &passedOn[Int(t)])
        }
    }

    /// Records many swipes and blocks at once (a rebuild): each slot's lists are built once, sorted, at their
    /// final size, instead of one sorted insertion per swipe. `swipes` are (viewer slot, target slot, liked),
    /// `blocks` pairs of slots; both may repeat pairs (kept once). Equivalent to `recordSwipe` / `block` per item.
    public mutating func load(swipes: SlotSwipes, blocks: [(Int32, Int32)]) {
        func bulkAppend(_ lists: inout [[Int32]], _ pairs: some Sequence<(Int32, Int32)>, count: Int) {
            var owners: [Int32] = []
            var values: [Int32] = []
            owners.reserveCapacity(count)
            values.reserveCapacity(count)
            for (owner, value) in pairs {
                owners.append(owner)
                values.append(value)
            }
            // Counting sort by owner, then each owner's run sorted and merged with what it held.
            var starts = [Int32](repeating: 0, count: lists.count + 1)
            for owner in owners { starts[Int(owner) + 1] += 1 }
            for i in 0..<lists.count { starts[i + 1] += starts[i] }
            var next = starts
            var grouped = [Int32](repeating: 0, count: values.count)
            for (owner, value) in zip(owners, values) {
                grouped[Int(next[Int(owner)])] = value
                next[Int(owner)] += 1
            }
            owners = []
            values = []
            for slot in 0..<lists.count where starts[slot + 1] > starts[slot] {
                var run = Array(grouped[Int(starts[slot])..<Int(starts[slot + 1])])
                run.append(contentsOf: lists[slot])
                run.sort()
                var unique: [Int32] = []
                unique.reserveCapacity(run.count)
                for value in run where unique.last != value { unique.append(value) }
                lists[slot] = unique
            }
        }
        let slots = Int32(users.count)
        let (live, owned) = (self.live, self.owned)
        let valid = { (a: Int32, b: Int32) in
            a >= 0 && a < slots && b >= 0 && b < slots && live[Int(a)] && live[Int(b)] && (owned[Int(a)] || owned[Int(b)])
        }
        var liveSwipes: [Int] = []
        liveSwipes.reserveCapacity(swipes.count)
        for i in 0..<swipes.count where valid(swipes.viewers[i], swipes.targets[i]) { liveSwipes.append(i) }
        bulkAppend(&swiped, liveSwipes.lazy.map { (swipes.viewers[$0], swipes.targets[$0]) }, count: liveSwipes.count)
        let passes = liveSwipes.filter { !swipes.liked[$0] }
        bulkAppend(&passedOn, passes.lazy.map { (swipes.targets[$0], swipes.viewers[$0]) }, count: passes.count)
        let likes = liveSwipes.filter { swipes.liked[$0] }
        bulkAppend(&likedBy, likes.lazy.map { (swipes.targets[$0], swipes.viewers[$0]) }, count: likes.count)
        let liveBlocks = blocks.filter { valid($0.0, $0.1) }
        bulkAppend(&blocked, liveBlocks + liveBlocks.map { ($0.1, $0.0) }, count: liveBlocks.count * 2)
    }

    /// Renumbers the slots in the order of the places (a rebuild, once its members are in): the cells by Z-order
    /// of their grid row and column, each cell's members in slot order (their bucket order when loaded afresh).
    /// Every per-slot array is then read nearly in sequence by a deck — a cell's members, and the cells next to
    /// it, sit in neighbouring slots — instead of one cache (and TLB) miss per candidate and per array: at 5M
    /// members in slot order of arrival, those misses were most of a deck's time. Returns each old slot's new slot (-1: a free slot, dropped).
    /// Decks are unchanged (the walk visits the same cells and reads each bucket in the same order); members
    /// inserted later take new slots at the end until the next rebuild.
    @discardableResult
    public mutating func arrangeByPlace() -> [Int32] {
        func zOrder(_ key: UInt32) -> UInt64 {
            func spread(_ value: UInt32) -> UInt64 {
                var x = UInt64(value) & 0xffff
                x = (x | (x << 8)) & 0x00ff_00ff
                x = (x | (x << 4)) & 0x0f0f_0f0f
                x = (x | (x << 2)) & 0x3333_3333
                x = (x | (x << 1)) & 0x5555_5555
                return x
            }
            return spread(key >> 13) << 1 | spread(key & 0x1fff)
        }
        // Every member by their cell, in or out of the region, so that every shard numbers its members as one
        // index does (the taste directions are estimated from the members in slot order: `refreshTasteBasis`).
        var placed: [(z: UInt64, slot: Int32)] = []  // then order[new] = old
        placed.reserveCapacity(slotOf.count)
        for slot in slotOf.values { placed.append((zOrder(bucketOf[Int(slot)]), slot)) }
        placed.sort { $0.z != $1.z ? $0.z < $1.z : $0.slot < $1.slot }
        let order = placed.map(\.slot)
        placed = []
        var newSlot = [Int32](repeating: -1, count: users.count)
        for (new, old) in order.enumerated() { newSlot[Int(old)] = Int32(new) }
        func arranged<T>(_ values: [T]) -> [T] { order.map { values[Int($0)] } }
        func renumbered(_ lists: [[Int32]]) -> [[Int32]] {
            order.map { old in lists[Int(old)].compactMap { newSlot[Int($0)] >= 0 ? newSlot[Int($0)] : nil }.sorted() }
        }
        users = arranged(users)
        latitudes = arranged(latitudes)
        geo = arranged(geo)
        cards = arranged(cards)
        hidesDistance = arranged(hidesDistance)
        interests = arranged(interests)
        attributes = arranged(attributes)
        lastActive = arranged(lastActive)
        joined = arranged(joined)
        live = arranged(live)
        owned = arranged(owned)
        bucketOf = arranged(bucketOf)
        positionInBucket = arranged(positionInBucket)
        swiped = renumbered(swiped)
        passedOn = renumbered(passedOn)
        likedBy = renumbered(likedBy)
        blocked = renumbered(blocked)
        for key in Array(buckets.keys) {
            buckets[key] = buckets[key]!.map { BucketEntry(slot: newSlot[Int($0.slot)], card: $0.card) }
        }
        slotOf = slotOf.mapValues { newSlot[Int($0)] }
        freeSlots = []
        return newSlot
    }

    /// Slots in use or free (the length of the per-slot arrays).
    var slotCapacity: Int { users.count }

    /// The bucket (precision-5 cell) a slot is in.
    func bucketKey(ofSlot slot: Int32) -> UInt32 { bucketOf[Int(slot)] }

    /// Undoes a pass (SwipeUndone): the target is unseen again.
    public mutating func undoSwipe(viewer: UserKey, target: UserKey) {
        guard let v = slotOf[viewer], let t = slotOf[target] else { return }
        Self.removeSorted(t, from: &swiped[Int(v)])
        Self.removeSorted(v, from: &passedOn[Int(t)])
        Self.removeSorted(v, from: &likedBy[Int(t)])
    }

    public mutating func block(_ a: UserKey, _ b: UserKey) {
        guard let x = slotOf[a], let y = slotOf[b], keepsEdge(x, y) else { return }
        Self.insertSorted(y, into: &blocked[Int(x)])
        Self.insertSorted(x, into: &blocked[Int(y)])
    }

    public mutating func unblock(_ a: UserKey, _ b: UserKey) {
        guard let x = slotOf[a], let y = slotOf[b] else { return }
        Self.removeSorted(y, from: &blocked[Int(x)])
        Self.removeSorted(x, from: &blocked[Int(y)])
    }

    /// Whether `viewer` swiped `target`.
    public func hasSwiped(_ viewer: UserKey, _ target: UserKey) -> Bool {
        guard let v = slotOf[viewer], let t = slotOf[target] else { return false }
        return Self.containsSorted(t, in: swiped[Int(v)])
    }

    /// Whether `member` liked `viewer` (both indexed): swiped them, and not a pass (which `passedOn` records).
    public func hasLiked(_ member: UserKey, _ viewer: UserKey) -> Bool {
        guard let m = slotOf[member], let v = slotOf[viewer] else { return false }
        return Self.containsSorted(v, in: swiped[Int(m)]) && !Self.containsSorted(m, in: passedOn[Int(v)])
    }

    /// Whether the member at `slot` swiped `target` (a slot too): the ranking's "already liked the viewer".
    func hasSwiped(slot: Int32, _ target: Int32) -> Bool { Self.containsSorted(target, in: swiped[Int(slot)]) }

    /// The compatible, unseen candidates for `viewer` (who must be indexed), nearest cells first, at most
    /// `query.limit`; nil when the viewer is not in the index. Compatibility is `MutualFit` (each within the
    /// other's radius and age range, each of a gender the other wants: what `couldShow` asks too); minus self,
    /// swiped, blocked either way, anyone who passed on the viewer, and `query.exclude`.
    public func candidates(for viewer: UserKey, _ query: DeckQuery) -> [IndexMatch]? {
        guard let v = slotOf[viewer] else { return nil }
        let vi = Int(v)
        let viewerGeo = geo[vi]
        let radius = query.radiusKm ?? Int(cards[vi].radiusKm)
        let fit = MutualFit(viewer: cards[vi], at: viewerGeo, radiusKm: radius, today: query.today)
        let required = query.requiredAttributes.bits
        // The viewer's sorted lists are searched in place (no set built per deck): only candidates that pass
        // every filter and the distance reach these lookups.
        let (passedOnViewer, blockedViewer, swipedByViewer) = (passedOn[vi], blocked[vi], swiped[vi])
        let (includeSwiped, includePassedOn) = (query.includeSwiped, query.includePassedOn)
        let excluding = !query.exclude.isEmpty
        var found: [IndexMatch] = []
        found.reserveCapacity(query.limit)
        var examined = 0
        // Distances are rounded to whole km before the radius test, so a member up to radius + 0.5 km away still
        // qualifies: the cells visited must cover that wider circle.
        GeoCell.forEachCell(latitude: latitudes[vi], longitude: viewerGeo.longitude, radiusKm: Double(radius) + 0.5) { key in
            guard let slots = buckets[key] else { return true }
            for entry in slots {
                let c = entry.slot
                let ci = Int(c)
                examined += 1
                let card = entry.card
                guard c != v, fit.admits(card), required == 0 || attributes[ci].bits & required == required else {
                    continue
                }
                let km = fit.kilometres(to: geo[ci])
                guard fit.reaches(km, card), includePassedOn || !Self.containsSorted(c, in: passedOnViewer),
                    !Self.containsSorted(c, in: blockedViewer),
                    includeSwiped || !Self.containsSorted(c, in: swipedByViewer),
                    !excluding || !query.exclude.contains(users[ci]), query.accept?(users[ci]) ?? true
                else { continue }
                found.append(IndexMatch(slot: c, user: users[ci], distanceKm: km))
                if found.count >= query.limit { return false }
            }
            return examined < query.scanLimit
        }
        return found
    }

    /// Whether `viewer`'s deck, reaching `radiusKm`, could show `target` (`MutualFit`: both indexed here, genders,
    /// ages and radii both ways at published positions), whatever either swiped, passed or blocked.
    public func couldShow(_ target: UserKey, to viewer: UserKey, radiusKm: Int, today: Int32) -> Bool {
        guard let v = slotOf[viewer].map(Int.init), let t = slotOf[target].map(Int.init), v != t else { return false }
        let fit = MutualFit(viewer: cards[v], at: geo[v], radiusKm: radiusKm, today: today)
        return fit.admits(cards[t]) && fit.reaches(fit.kilometres(to: geo[t]), cards[t])
    }

    /// Whether `target` may still be shown to `viewer` (a deck page served from an earlier ranking): both
    /// indexed, not swiped by the viewer, no pass on the viewer, no block either way.
    public func isStillUnseen(viewer: UserKey, target: UserKey) -> Bool {
        guard let v = slotOf[viewer], let t = slotOf[target] else { return false }
        return !Self.containsSorted(t, in: swiped[Int(v)]) && !Self.containsSorted(t, in: passedOn[Int(v)])
            && !Self.containsSorted(t, in: blocked[Int(v)])
    }

    /// The member's own radius (nil: not indexed).
    public func radiusKm(of user: UserKey) -> Int? { slotOf[user].map { Int(cards[Int($0)].radiusKm) } }

    /// Whether a block (or an ended match) separates two indexed members.
    public func isBlocked(_ a: UserKey, _ b: UserKey) -> Bool {
        guard let x = slotOf[a], let y = slotOf[b] else { return false }
        return Self.containsSorted(y, in: blocked[Int(x)])
    }

    /// The km shown between two indexed members (published positions, whole km, floor 1: `PublishedLocation`).
    public func coarseKilometres(_ a: UserKey, _ b: UserKey) -> Int? {
        guard let x = slotOf[a].map(Int.init), let y = slotOf[b].map(Int.init) else { return nil }
        return PublishedLocation.kilometres(geo[x], geo[y])
    }

    /// The indexed member's user key at a slot, and their interests (ranking, learning).
    public func interests(of user: UserKey) -> InterestSet? { slotOf[user].map { interests[Int($0)] } }

    /// The birth year of a slot (age gaps for ranking).
    func birthYear(_ slot: Int) -> Int32 { cards[slot].birthDate / 10000 }

    /// The birth dates (yyyymmdd) whose `age(birthDate:today:)` lies in `ages`: those `> after` and `<= upTo`.
    /// Exact for the truncating division, future birth dates (negative differences) included.
    static func birthDateRange(ages: ClosedRange<Int>, today: Int32) -> (after: Int32, upTo: Int32) {
        let today = Int64(today)
        // age ≤ max ⇔ today − b < 10000 (max + 1) (a negative difference gives an age ≤ 0 ≤ max, and is below it too).
        let after = today - 10_000 * Int64(ages.upperBound + 1)
        // age ≥ min ≥ 1 ⇔ today − b ≥ 10000 min; age ≥ 0 ⇔ today − b > −10000 (truncation towards zero).
        let upTo = ages.lowerBound >= 1 ? today - 10_000 * Int64(ages.lowerBound) : today + 9_999
        return (Int32(clamping: after), Int32(clamping: upTo))
    }

    /// Whole years between two yyyymmdd dates.
    static func age(birthDate: Int32, today: Int32) -> Int { Int((today - birthDate) / 10000) }

    // MARK: Storage

    private mutating func appendEmptySlot() {
        users.append(UserKey(high: 0, low: 0))
        latitudes.append(0)
        geo.append(PublishedPoint(latitude: 0, longitude: 0))
        cards.append(FilterCard(birthDate: 0, gender: 0, interestedIn: 0, ageMin: 0, ageMax: 0, radiusKm: 0))
        hidesDistance.append(false)
        interests.append(InterestSet())
        attributes.append(InterestSet())
        lastActive.append(0)
        joined.append(0)
        live.append(false)
        owned.append(false)
        bucketOf.append(0)
        positionInBucket.append(-1)
        swiped.append([])
        passedOn.append([])
        likedBy.append([])
        blocked.append([])
    }

    private mutating func removeFromBucket(_ slot: Int32) {
        let i = Int(slot)
        let position = Int(positionInBucket[i])
        guard position >= 0, var bucket = buckets[bucketOf[i]] else { return }
        buckets[bucketOf[i]] = nil  // unique reference: the swap-remove below does not copy the array
        let last = bucket.removeLast()
        if last.slot != slot {
            bucket[position] = last
            positionInBucket[Int(last.slot)] = Int32(position)
        }
        if !bucket.isEmpty { buckets[bucketOf[i]] = bucket }
        positionInBucket[i] = -1
    }

    public func hidesDistance(_ slot: Int32) -> Bool { hidesDistance[Int(slot)] }

    static func insertSorted(_ value: Int32, into array: inout [Int32]) {
        var low = 0
        var high = array.count
        while low < high {
            let mid = (low + high) / 2
            if array[mid] < value { low = mid + 1 } else { high = mid }
        }
        if low < array.count && array[low] == value { return }
        array.insert(value, at: low)
    }

    static func removeSorted(_ value: Int32, from array: inout [Int32]) {
        var low = 0
        var high = array.count
        while low < high {
            let mid = (low + high) / 2
            if array[mid] < value { low = mid + 1 } else { high = mid }
        }
        if low < array.count && array[low] == value { array.remove(at: low) }
    }

    static func containsSorted(_ value: Int32, in array: [Int32]) -> Bool {
        var low = 0
        var high = array.count
        while low < high {
            let mid = (low + high) / 2
            if array[mid] < value { low = mid + 1 } else { high = mid }
        }
        return low < array.count && array[low] == value
    }
}
