import Testing

@testable import KindredMatch

/// The pair state machine without I/O: every swipe, undo, block and unmatch transition, mutual vs one-way.
@Suite struct PairStateTests {
    static let me = "a"
    static let other = "b"
    static let now: Int64 = 1_000_000

    static func swipe(_ kind: SwipeKind, outcome: SwipeResultKind = .recorded, match: String? = nil) -> SwipeRecord {
        SwipeRecord(id: "old", kind: kind, swipedUnixMs: 1, outcome: outcome, matchID: match)
    }

    static let mutualMatch = MatchRecord(id: "m0", mode: .mutual, initiator: other, createdUnixMs: 1)
    static let followedByOther = MatchRecord(id: "m0", mode: .oneWay, initiator: other, createdUnixMs: 1)
    static let followingOther = MatchRecord(id: "m0", mode: .oneWay, initiator: me, createdUnixMs: 1)

    /// What a swipe must lead to: (name, state before, action, mode, expected kind of result, outcome, match
    /// created?, match reciprocated?).
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var before: PairState
        var kind: SwipeKind
        var mode: MatchMode
        var expected: Expected
        var testDescription: String { self.name }
    }

    enum Expected: Sendable, Equatable {
        case invisible
        case replay
        case alreadySwiped
        case record(SwipeResultKind, created: Bool, reciprocated: Bool)
    }

    static let cases: [Case] = [
        Case(name: "mutual: first like is recorded", before: PairState(), kind: .like, mode: .mutual,
             expected: .record(.recorded, created: false, reciprocated: false)),
        Case(name: "mutual: like after their like matches", before: PairState(theirs: .like), kind: .like,
             mode: .mutual, expected: .record(.matched, created: true, reciprocated: false)),
        Case(name: "mutual: like after their pass is only recorded", before: PairState(theirs: .pass), kind: .like,
             mode: .mutual, expected: .record(.recorded, created: false, reciprocated: false)),
        Case(name: "mutual: pass after their like is recorded", before: PairState(theirs: .like), kind: .pass,
             mode: .mutual, expected: .record(.recorded, created: false, reciprocated: false)),
        Case(name: "pass is recorded", before: PairState(), kind: .pass, mode: .mutual,
             expected: .record(.recorded, created: false, reciprocated: false)),
        Case(name: "same like again is a replay", before: PairState(mine: swipe(.like)), kind: .like, mode: .mutual,
             expected: .replay),
        Case(name: "same pass again is a replay", before: PairState(mine: swipe(.pass)), kind: .pass, mode: .oneWay,
             expected: .replay),
        Case(name: "like after own pass is ALREADY_SWIPED", before: PairState(mine: swipe(.pass)), kind: .like,
             mode: .mutual, expected: .alreadySwiped),
        Case(name: "pass after own like is ALREADY_SWIPED", before: PairState(mine: swipe(.like)), kind: .pass,
             mode: .oneWay, expected: .alreadySwiped),
        Case(name: "blocked pair is invisible (like)", before: PairState(theirs: .like, blocked: true), kind: .like,
             mode: .mutual, expected: .invisible),
        Case(name: "blocked pair is invisible even for a replay", before: PairState(mine: swipe(.pass), blocked: true),
             kind: .pass, mode: .mutual, expected: .invisible),
        Case(name: "one-way: like connects at once", before: PairState(), kind: .like, mode: .oneWay,
             expected: .record(.connected, created: true, reciprocated: false)),
        Case(name: "one-way: like back reciprocates the connection",
             before: PairState(theirs: .like, match: followedByOther), kind: .like, mode: .oneWay,
             expected: .record(.connected, created: false, reciprocated: true)),
        Case(name: "one-way: pass on a follower leaves the connection", before: PairState(theirs: .like, match: followedByOther),
             kind: .pass, mode: .oneWay, expected: .record(.recorded, created: false, reciprocated: false)),
        Case(name: "one-way: their like without connection (mode changed) connects mutually",
             before: PairState(theirs: .like), kind: .like, mode: .oneWay,
             expected: .record(.connected, created: true, reciprocated: false)),
        Case(name: "mutual: existing match is not made twice", before: PairState(theirs: .like, match: mutualMatch),
             kind: .like, mode: .mutual, expected: .record(.recorded, created: false, reciprocated: false)),
    ]

    @Test(arguments: cases)
    func swipeTransitions(_ testCase: Case) {
        var state = testCase.before
        let action = state.swipe(
            testCase.kind, actor: Self.me, other: Self.other, mode: testCase.mode, swipeID: "s1", matchID: "m1",
            nowUnixMs: Self.now)
        switch (action, testCase.expected) {
        case (.invisible, .invisible), (.alreadySwiped, .alreadySwiped):
            #expect(state == testCase.before, "nothing changes")
        case (.replay(let record), .replay):
            #expect(record == testCase.before.mine)
            #expect(state == testCase.before)
        case (.record(let record, let created, let reciprocated), .record(let outcome, let create, let reciprocate)):
            #expect(record.outcome == outcome)
            #expect(record.id == "s1")
            #expect((created != nil) == create)
            #expect((reciprocated != nil) == reciprocate)
            #expect(state.mine == record)
            if let created { #expect(record.matchID == created.id) }
            if outcome == .matched { #expect(created?.initiator == Self.other, "the first liker initiated") }
            if testCase.mode == .oneWay, create { #expect(created?.initiator == Self.me) }
            if reciprocate { #expect(state.match?.reciprocatedUnixMs == Self.now) }
        default:
            Issue.record("\(testCase.name): got \(action)")
        }
    }

    @Test func blockEndsTheMatchAndHidesThePair() {
        var state = PairState(mine: Self.swipe(.like), theirs: .like, match: Self.mutualMatch)
        #expect(state.block() == Self.mutualMatch)
        #expect(state.blocked && state.match == nil)
        #expect(state.block() == nil, "a second block ends nothing")
        let action = state.swipe(.like, actor: "a", other: "b", mode: .mutual, swipeID: "s", matchID: "m", nowUnixMs: 5)
        #expect(action == .invisible)
    }

    @Test func unmatchIsIdempotent() {
        var state = PairState(match: Self.followingOther)
        #expect(state.unmatch() == Self.followingOther)
        #expect(state.unmatch() == nil)
    }

    @Test func onlyPassesCanBeUndone() {
        var pass = PairState(mine: Self.swipe(.pass))
        let undone = pass.undoPass()
        #expect(undone)
        #expect(pass.mine == nil, "unseen again")
        let after = pass.swipe(.like, actor: "a", other: "b", mode: .mutual, swipeID: "s", matchID: "m", nowUnixMs: 9)
        #expect(after == .record(pass.mine!, created: nil, reciprocated: nil), "a new decision is possible")
        var like = PairState(mine: Self.swipe(.like))
        let undoneLike = like.undoPass()
        #expect(!undoneLike)
    }
}

@Suite struct UndoPolicyTests {
    static let policy = UndoPolicy(windowSeconds: 300, dailyLimit: 2)
    static let pass = SwipeRecord(id: "p", kind: .pass, swipedUnixMs: 1_000_000, outcome: .recorded)
    static let like = SwipeRecord(id: "l", kind: .like, swipedUnixMs: 1_000_000, outcome: .recorded)

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var policy = UndoPolicyTests.policy
        var latest: SwipeRecord?
        var named: String?
        var undone = false
        var undos: [Int64] = []
        var now: Int64 = 1_000_000 + 10_000
        var expected: UndoPolicy.Decision
        var testDescription: String { self.name }
    }

    static let cases: [Case] = [
        Case(name: "last pass in the window", latest: pass, expected: .undo),
        Case(name: "named last pass", latest: pass, named: "p", expected: .undo),
        Case(name: "no swipe at all", latest: nil, expected: .notFound),
        Case(name: "last swipe is a like", latest: like, expected: .notAllowed),
        Case(name: "window passed", latest: pass, now: 1_000_000 + 300_001, expected: .notAllowed),
        Case(name: "window edge", latest: pass, now: 1_000_000 + 300_000, expected: .undo),
        Case(name: "undo disabled", policy: UndoPolicy(windowSeconds: 0, dailyLimit: 3), latest: pass, expected: .notAllowed),
        Case(name: "named pass is not the last swipe", latest: pass, named: "older", expected: .notAllowed),
        Case(name: "named pass undone before: replay", latest: like, named: "p", undone: true, expected: .replay),
        Case(name: "daily limit reached", latest: pass, undos: [500, 900],
             expected: .limitReached(resetUnixMs: 500 + 86_400_000)),
    ]

    @Test(arguments: cases)
    func decisions(_ testCase: Case) {
        #expect(
            testCase.policy.decide(
                latest: testCase.latest, named: testCase.named, namedWasUndone: testCase.undone,
                undosInWindow: testCase.undos, nowUnixMs: testCase.now) == testCase.expected)
    }

    @Test func likeBudgetResetsWhenTheOldestLikeLeavesTheWindow() {
        var budget = LikeBudget(limit: 2, used: 0, oldestUnixMs: nil)
        #expect(budget.take(nowUnixMs: 100) == nil)
        #expect(budget.take(nowUnixMs: 200) == nil)
        #expect(budget.remaining == 0)
        let reset = budget.take(nowUnixMs: 300)
        #expect(reset == Optional(Int64(86_400_100)))
        #expect(budget.used == 2)
    }
}
