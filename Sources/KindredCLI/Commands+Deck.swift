import ArgumentParser
import Foundation
import KindredProto

// Discovering members (kindred.api.v1 DeckService GetDeck, GetRecommendations, SearchMembers): the deck with
// like/pass from the prompt, top picks and the members list. Cards come from discovery with profile's cards
// through the gateway; distances are coarse whole kilometres (DESIGN §5).

private typealias DeckAPI = Kindred.Api.V1.DeckService.Method

/// `kindred deck [--list | --json] [--limit N] [--filter key=value ...]`.
struct DeckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deck",
        abstract: "Show the members the deck offers you, one card at a time; like or pass at the prompt.",
        discussion: """
            At the prompt: l (like), p (pass), s (skip: keep for later), q (quit). Standard input gives one answer \
            per line when it is not a terminal; end of input quits. With --list or --json the cards of the first \
            page are printed and nothing is swiped (for scripts).
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print the first page of cards and stop (no prompt).") var list = false
    @Flag(help: "Print the first page of cards as JSON and stop (no prompt).") var json = false
    @Option(help: "Cards per page, 1..50.") var limit: Int32 = 10
    @Option(
        help: ArgumentHelp(
            "Only cards whose attribute matches (repeat; see `kindred community show`).",
            valueName: "key=value"
        )
    )
    var filter: [String] = []

    func validate() throws {
        guard (1...50).contains(self.limit) else { throw ValidationError("--limit must be 1..50") }
        guard !(self.list && self.json) else { throw ValidationError("give --list or --json, not both") }
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let filters = try await DeckRender.filters(self.filter, invocation)
            var request = Kindred.Api.V1.GetDeckRequest.with {
                $0.pageSize = self.limit
                $0.attributeFilters = filters
            }
            var page = try await invocation.gateway.authenticated(DeckAPI.getDeck, request)
            if self.json {
                Console.out(DeckRender.json(page.cards, radiusKm: page.radiusKm, widened: page.widened))
                return
            }
            if page.widened { Console.out("(The deck ran dry nearby: showing people up to \(page.radiusKm) km away.)") }
            if self.list {
                DeckRender.list(page.cards).forEach(Console.out)
                return
            }
            var skipped: [String] = []
            while true {
                for card in page.cards {
                    DeckRender.card(card).forEach(Console.out)
                    Console.prompt("[l]ike, [p]ass, [s]kip, [q]uit? ")
                    guard let answer = readLine(strippingNewline: true) else {
                        Console.out("Bye.")
                        return
                    }
                    let decision = DeckDecision(answer)
                    switch decision {
                    case .like, .pass:
                        let response = try await invocation.gateway.authenticated(
                            DeckAPI.swipe,
                            .with {
                                $0.targetUserId = card.profile?.userId ?? ""
                                $0.action = decision == .like ? .like : .pass
                                $0.surface = "deck"
                            }
                        )
                        Console.out(MatchRender.swipe(response))
                    case .skip:
                        skipped.append(card.profile?.userId ?? "")
                    case .quit:
                        return
                    }
                }
                guard !page.nextPageToken.isEmpty else { break }
                request.pageToken = page.nextPageToken
                request.excludeUserIds = Array(skipped.suffix(100))
                page = try await invocation.gateway.authenticated(DeckAPI.getDeck, request)
            }
            Console.out(DeckRender.emptyDeck)
        }
    }
}

/// `kindred picks [--json]`: the top recommendations.
struct Picks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "picks",
        abstract: "Show your top picks: the members most likely to like you back."
    )
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print JSON.") var json = false
    @Option(help: "How many, 1..10.") var limit: Int32 = 3

    func validate() throws {
        guard (1...10).contains(self.limit) else { throw ValidationError("--limit must be 1..10") }
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let response = try await invocation.gateway.authenticated(
                DeckAPI.getRecommendations,
                .with { $0.limit = self.limit }
            )
            if self.json {
                Console.out(DeckRender.json(response.cards))
            } else if response.cards.isEmpty {
                Console.out("No picks right now.")
            } else {
                response.cards.flatMap(DeckRender.card).forEach(Console.out)
            }
        }
    }
}

/// `kindred members [--query TEXT] [--filter key=value ...] [--max-distance KM] [--page-token T] [--json]`.
struct Members: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "members",
        abstract: "List members (nearest first), filtered by attributes and words.",
        discussion: "One page per call; the next page's token is printed last (pass it with --page-token)."
    )
    @OptionGroup var global: GlobalOptions
    @Option(help: ArgumentHelp("Only members whose attribute matches (repeat).", valueName: "key=value"))
    var filter: [String] = []
    @Option(help: "Words matched against names and text attributes.") var query = ""
    @Option(help: "Radius in km (default: your own).") var maxDistance: Int32 = 0
    @Option(help: "Members per page, 1..50.") var limit: Int32 = 20
    @Option(help: "Token of the next page, from the previous output.") var pageToken = ""
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard (1...50).contains(self.limit) else { throw ValidationError("--limit must be 1..50") }
        guard self.maxDistance >= 0 else { throw ValidationError("--max-distance must be >= 0") }
    }

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let filters = try await DeckRender.filters(self.filter, invocation)
            let response = try await invocation.gateway.authenticated(
                DeckAPI.searchMembers,
                .with {
                    $0.query = self.query
                    $0.attributeFilters = filters
                    $0.maxDistanceKm = self.maxDistance
                    $0.pageSize = self.limit
                    $0.pageToken = self.pageToken
                }
            )
            if self.json {
                Console.out(DeckRender.json(response.cards, nextPageToken: response.nextPageToken))
                return
            }
            DeckRender.list(response.cards).forEach(Console.out)
            if response.cards.isEmpty { Console.out("No members found.") }
            if !response.nextPageToken.isEmpty { Console.out("next page: --page-token \(response.nextPageToken)") }
        }
    }
}

/// An answer at the deck's prompt.
enum DeckDecision: Equatable {
    case like, pass, skip, quit

    /// "l", "like", "p", "pass", "q", "quit" (any case, spaces ignored); anything else ("s", "skip", "") skips.
    init(_ text: String) {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "l", "like", "y", "yes": self = .like
        case "p", "pass", "n", "no": self = .pass
        case "q", "quit", "exit": self = .quit
        default: self = .skip
        }
    }
}

/// Text and JSON of deck cards; attribute filters from `key=value` (pure: tested without a gateway).
enum DeckRender {
    static let emptyDeck = "No one new nearby right now: come back later, or widen your radius."

    /// Several lines per card: who, distance and id; interests, attributes, bio; the first photo's URL.
    static func card(_ card: Kindred.Api.V1.DeckCard) -> [String] {
        let profile = card.profile ?? .init()
        var lines = [
            "\(profile.displayName), \(profile.ageYears)  \(Self.distance(profile))  (user \(profile.userId))"
                + (card.topPick ? "  ★ top pick" : "")
        ]
        if !profile.interests.isEmpty { lines.append("  interests: \(profile.interests.joined(separator: ", "))") }
        lines += profile.attributes.map { "  \($0.key): \(ProfileCommand.text($0))" }
        if !profile.bio.isEmpty { lines.append("  bio: \(profile.bio)") }
        if let url = Self.photoURL(profile) { lines.append("  photo: \(url)") }
        return lines
    }

    /// One line per card, the user id first (for `awk '{print $1}'`).
    static func list(_ cards: [Kindred.Api.V1.DeckCard]) -> [String] {
        cards.map { card in
            let profile = card.profile ?? .init()
            let interests = profile.interests.isEmpty ? "" : "  " + profile.interests.joined(separator: ",")
            return
                "\(profile.userId)  \(profile.displayName), \(profile.ageYears)  \(Self.distance(profile))\(interests)"
        }
    }

    static func distance(_ profile: Kindred.Api.V1.ProfileCard) -> String {
        profile.distanceKm > 0 ? "\(profile.distanceKm) km away" : "distance hidden"
    }

    /// The card-size JPEG's URL of the first photo (the full one if there is no card rendition).
    static func photoURL(_ profile: Kindred.Api.V1.ProfileCard) -> String? {
        guard let photo = profile.photos.first else { return nil }
        return
            (photo.urls.first { $0.variant == .card && $0.format == "jpeg" }
            ?? photo.urls.first { $0.format == "jpeg" })?.url
    }

    struct CardJSON: Encodable {
        var userId, displayName: String
        var ageYears, distanceKm: Int32
        var interests: [String]
        var attributes: [String: String]
        var bio, jobTitle, city: String
        var photoUrls: [String]
        var topPick: Bool
        var sharedAttributeKeys: [String]
    }

    struct PageJSON: Encodable {
        var cards: [CardJSON]
        var radiusKm: Int32?
        var widened: Bool?
        var nextPageToken: String?
    }

    static func json(
        _ cards: [Kindred.Api.V1.DeckCard],
        radiusKm: Int32? = nil,
        widened: Bool? = nil,
        nextPageToken: String? = nil
    ) -> String {
        let items = cards.map { card in
            let profile = card.profile ?? .init()
            return CardJSON(
                userId: profile.userId,
                displayName: profile.displayName,
                ageYears: profile.ageYears,
                distanceKm: profile.distanceKm,
                interests: profile.interests,
                attributes: Dictionary(
                    profile.attributes.map { ($0.key, ProfileCommand.text($0)) },
                    uniquingKeysWith: { a, _ in a }
                ),
                bio: profile.bio,
                jobTitle: profile.jobTitle,
                city: profile.city,
                photoUrls: profile.photos.compactMap { photo in
                    (photo.urls.first { $0.variant == .card && $0.format == "jpeg" } ?? photo.urls.first)?.url
                },
                topPick: card.topPick,
                sharedAttributeKeys: card.sharedAttributeKeys
            )
        }
        return Render.encode(
            PageJSON(
                cards: items,
                radiusKm: radiusKm,
                widened: widened,
                nextPageToken: nextPageToken.flatMap { $0.isEmpty ? nil : $0 }
            )
        )
    }

    /// `key=value` filters typed by the caller's community definitions: choices `a,b` (any of), integers `n`
    /// or `min..max`, booleans `true`/`false`. The community is fetched only when there are filters.
    static func filters(_ texts: [String], _ invocation: Invocation) async throws -> [Kindred.Common.V1.AttributeFilter]
    {
        guard !texts.isEmpty else { return [] }
        let community = try await ProfileCommand.community(invocation)
        return try texts.map { try Self.filter($0, community: community) }
    }

    static func filter(_ text: String, community: Kindred.Common.V1.Community?) throws
        -> Kindred.Common.V1.AttributeFilter
    {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw CLIError.usage("--filter takes key=value")
        }
        guard let definition = community?.settings?.attributeDefinitions.first(where: { $0.key == parts[0] }) else {
            throw CLIError.usage("the community has no attribute \(parts[0]) (see: kindred community show)")
        }
        guard definition.filterable else { throw CLIError.usage("\(parts[0]) cannot be filtered on") }
        var filter = Kindred.Common.V1.AttributeFilter()
        filter.key = parts[0]
        switch definition.attributeType {
        case .integer:
            let bounds = parts[1].components(separatedBy: "..")
            guard (1...2).contains(bounds.count), let low = Int64(bounds[0]), let high = Int64(bounds.last!),
                low <= high
            else {
                throw CLIError.usage("\(parts[0]) takes a whole number or a range min..max")
            }
            filter.condition = .integerRange(
                .with {
                    $0.minInclusive = low
                    $0.maxInclusive = high
                }
            )
        case .bool:
            guard let flag = Bool(parts[1]) else { throw CLIError.usage("\(parts[0]) takes true or false") }
            filter.condition = .boolEquals(flag)
        case .singleChoice, .multiChoice:
            let values = parts[1].split(separator: ",").map(String.init)
            let known = Set(definition.choices.map(\.value))
            if let unknown = values.first(where: { !known.contains($0) }) {
                throw CLIError.usage(
                    "\(unknown) is not a choice of \(parts[0]): "
                        + definition.choices.map(\.value).joined(separator: ", ")
                )
            }
            filter.condition = .anyOf(.with { $0.values = values })
        default:
            throw CLIError.usage("\(parts[0]) is a text attribute: use --query")
        }
        return filter
    }
}

/// `kindred photo sample FILE [--seed N]`: writes a generated portrait, for trying photos without one's own.
extension PhotoCommand {
    struct Sample: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a generated portrait (PNG, 600x750) to FILE, to try `kindred photo add` with.",
            discussion:
                "A drawing of flat shapes made from the seed (the same seed, the same picture); nothing is sent."
        )
        @Argument(help: "Where to write the PNG.") var file: String
        @Option(help: "Picture number: different seeds, different pictures.") var seed: UInt64 = 1

        func run() throws {
            let bytes = DemoPortrait.png(seed: self.seed)
            guard FileManager.default.createFile(atPath: self.file, contents: Data(bytes)) else {
                throw CLIError.usage("cannot write \(self.file)")
            }
            Console.out("Wrote \(self.file) (\(bytes.count) bytes).")
        }
    }
}
