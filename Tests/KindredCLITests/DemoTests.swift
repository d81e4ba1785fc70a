import ArgumentParser
import Foundation
import KindredProto
import Testing

@testable import KindredCLI

/// The demo's values without a gateway: the population from a seed, the PNG encoder, the sink's log lines, the
/// deck's filters and prompt answers. (The cluster tests run them against real services: test_seed.py,
/// test_walkthrough.py.)
@Suite struct DemoTests {
    @Test func theSameSeedGivesTheSamePeople() throws {
        let first = DemoPopulation(seed: 7, count: 60), again = DemoPopulation(seed: 7, count: 60)
        #expect(
            try first.members.map { try $0.fields.serializedBytes() }
                == again.members.map { try $0.fields.serializedBytes() }
        )
        #expect(first.members.map(\.latitude) == again.members.map(\.latitude))
        #expect(first.swipes == again.swipes)
        let other = DemoPopulation(seed: 8, count: 60)
        #expect(
            try first.members.map { try $0.fields.serializedBytes() }
                != other.members.map { try $0.fields.serializedBytes() }
        )
        // A larger population starts with the same people (member n depends only on the seed and n, given the
        // city count).
        #expect(DemoPopulation(seed: 7, count: 70).members[5].email == first.members[5].email)
    }

    @Test func membersAreUniqueSpreadAndComplete() {
        let population = DemoPopulation(seed: 1, count: 300)
        #expect(Set(population.members.map(\.email)).count == 300)
        #expect(Set(population.members.map(\.username)).count == 300)
        #expect(Set(population.members.map(\.community)) == ["dating", "bizmatch", "playdates", "fitness"])
        #expect(Set(population.members.map(\.city.name)).count == 5)
        for member in population.members {
            let city = member.city
            #expect(abs(member.latitude - city.latitude) < 0.04)
            #expect(!member.fields.displayName.isEmpty && (3...5).contains(member.fields.interests.count))
            switch member.community {
            case "dating":
                #expect(
                    member.photoSeeds.count == 2 && member.fields.gender != .unspecified
                        && !member.fields.interestedIn.isEmpty
                )
            case "bizmatch":
                #expect(
                    Set(member.fields.attributes.map(\.key)).isSuperset(of: ["business_field", "role"])
                        && !member.fields.bio.isEmpty
                )
            case "playdates":
                #expect(Set(member.fields.attributes.map(\.key)).isSuperset(of: ["dog_name", "breed"]))
            default:
                #expect(member.fields.attributes.map(\.key) == ["activities"])
            }
        }
    }

    @Test func swipesStayAmongCompatibleNeighboursAndLeaveDecksFull() {
        let population = DemoPopulation(seed: 3, count: 120)
        let swipes = population.swipes
        #expect(!swipes.isEmpty)
        #expect(Set(swipes.map { [$0.from, $0.to] }).count == swipes.count)  // nobody swipes twice on the same one
        for swipe in swipes {
            #expect(DemoPopulation.compatible(population.members[swipe.from], population.members[swipe.to]))
        }
        let mutualLikes = swipes.filter { swipe in
            swipe.like && swipes.contains { $0.from == swipe.to && $0.to == swipe.from && $0.like }
        }
        #expect(!mutualLikes.isEmpty)
        // Nobody swipes on more than half of their compatible neighbours.
        for member in population.members {
            let neighbours = population.members.filter { DemoPopulation.compatible(member, $0) }.count
            #expect(swipes.filter { $0.from == member.index }.count <= neighbours / 2)
        }
    }

    @Test func portraitsArePNGsWithValidChunks() throws {
        let png = DemoPortrait.png(seed: 42, width: 40, height: 50)
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var offset = 8
        var types: [String] = []
        while offset < png.count {
            let length =
                Int(png[offset]) << 24 | Int(png[offset + 1]) << 16 | Int(png[offset + 2]) << 8 | Int(png[offset + 3])
            let typed = Array(png[(offset + 4)..<(offset + 8 + length)])
            let crc = png[(offset + 8 + length)..<(offset + 12 + length)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(CRC32.checksum(typed) == crc)
            types.append(String(decoding: typed.prefix(4), as: UTF8.self))
            offset += 12 + length
        }
        #expect(types == ["IHDR", "IDAT", "IEND"])
        #expect(DemoPortrait.png(seed: 42, width: 40, height: 50) == png)
        #expect(DemoPortrait.png(seed: 43, width: 40, height: 50) != png)
    }

    /// Known values: CRC-32 and Adler-32 of "123456789" (the check values of both algorithms' specifications).
    @Test func checksums() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(Adler32.checksum(Array("123456789".utf8)) == 0x091E_01DE)
    }

    @Test func deflateOfARunIsAMatch() {
        // "abcabcabc…" (300 bytes): 3 literals, then matches of distance 3; far smaller than the input.
        let data = Array(repeating: Array("abc".utf8), count: 100).flatMap { $0 }
        let compressed = Zlib.compress(data, repeatDistance: 3)
        #expect(compressed.prefix(2) == [0x78, 0x01])
        #expect(compressed.count < 20)
    }

    @Test(
        arguments: [
            (
                "mail mail-000001.eml to=ann@example.com subject=\"Confirm your email address\" code=123456",
                "ann@example.com", "123456"
            ),
            ("mail mail-000002.eml to=bo@example.com subject=\"Your password was changed\"", nil, nil),
            ("LISTENING 127.0.0.1:2525 mail in /tmp", nil, nil),
        ] as [(String, String?, String?)]
    )
    func sinkLogLines(line: String, address: String?, code: String?) {
        let parsed = MailCodes.parse(Substring(line))
        #expect(parsed?.0 == address && parsed?.1 == code)
    }

    @Test func mailCodesWaitForTheLineAfterTheMark() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sink-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        FileManager.default.createFile(
            atPath: path,
            contents: Data("mail mail-000001.eml to=a@x.org subject=\"S\" code=111111\n".utf8)
        )
        let codes = MailCodes(path: path)
        let mark = try await codes.mark()
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("mail mail-000002.eml to=a@x.org subject=\"S\" code=2222".utf8))
        try handle.write(contentsOf: Data("22\n".utf8))  // a line written in two parts
        try handle.close()
        #expect(try await codes.code(for: "a@x.org", after: mark, timeout: .seconds(2)) == "222222")
        #expect(try await codes.code(for: "a@x.org", after: 0, timeout: .seconds(2)) == "111111")
        await #expect(throws: CLIError.self) {
            try await codes.code(for: "b@x.org", after: 0, timeout: .milliseconds(100))
        }
    }

    static let community = Kindred.Common.V1.Community.with {
        $0.settings = .with {
            $0.attributeDefinitions = [
                .with {
                    $0.key = "activities"
                    $0.attributeType = .multiChoice
                    $0.filterable = true
                    $0.choices = ["running", "yoga"].map { value in .with { $0.value = value } }
                },
                .with {
                    $0.key = "weight_kg"
                    $0.attributeType = .integer
                    $0.filterable = true
                },
                .with {
                    $0.key = "company"
                    $0.attributeType = .text
                },
            ]
        }
    }

    @Test func filters() throws {
        let choices = try DeckRender.filter("activities=running,yoga", community: Self.community)
        #expect(choices.key == "activities" && choices.condition == .anyOf(.with { $0.values = ["running", "yoga"] }))
        let range = try DeckRender.filter("weight_kg=5..20", community: Self.community)
        #expect(
            range.condition
                == .integerRange(
                    .with {
                        $0.minInclusive = 5; $0.maxInclusive = 20
                    }
                )
        )
        let exact = try DeckRender.filter("weight_kg=7", community: Self.community)
        #expect(
            exact.condition
                == .integerRange(
                    .with {
                        $0.minInclusive = 7; $0.maxInclusive = 7
                    }
                )
        )
        for bad in [
            "activities=swimming", "weight_kg=20..5", "weight_kg=heavy", "company=Acme", "height=3", "activities",
        ] {
            #expect(throws: CLIError.self, "\(bad)") { try DeckRender.filter(bad, community: Self.community) }
        }
    }

    @Test(arguments: [
        ("l", DeckDecision.like), ("Like", .like), (" p ", .pass), ("pass", .pass), ("q", .quit), ("", .skip),
        ("s", .skip),
    ])
    func promptAnswers(text: String, decision: DeckDecision) {
        #expect(DeckDecision(text) == decision)
    }

    @Test func cardsShowNameAgeDistanceInterestsAndPhoto() {
        let card = Kindred.Api.V1.DeckCard.with {
            $0.profile = .with {
                $0.userId = "u-1"
                $0.displayName = "Bob"
                $0.ageYears = 34
                $0.distanceKm = 3
                $0.interests = ["jazz", "climbing"]
                $0.photos = [
                    .with {
                        $0.urls = [
                            .with {
                                $0.variant = .full; $0.format = "jpeg"; $0.url = "http://m/full.jpg"
                            },
                            .with {
                                $0.variant = .card; $0.format = "jpeg"; $0.url = "http://m/card.jpg"
                            },
                        ]
                    }
                ]
            }
        }
        #expect(
            DeckRender.card(card) == [
                "Bob, 34  3 km away  (user u-1)", "  interests: jazz, climbing", "  photo: http://m/card.jpg",
            ]
        )
        #expect(DeckRender.list([card]) == ["u-1  Bob, 34  3 km away  jazz,climbing"])
    }

    @Test func commandLines() throws {
        let seed = try #require(
            try KindredCommand.parseAsRoot(["admin", "seed", "--seed", "9", "--members", "30"]) as? AdminCommand.Seed
        )
        #expect(seed.seed == 9 && seed.members == 30 && seed.concurrency == 4 && !seed.json)
        let deck = try #require(
            try KindredCommand.parseAsRoot(["deck", "--list", "--filter", "activities=yoga"]) as? DeckCommand
        )
        #expect(deck.list && deck.filter == ["activities=yoga"] && deck.limit == 10)
        let members = try #require(
            try KindredCommand.parseAsRoot(["members", "--page-token", "t1", "--max-distance", "5"]) as? Members
        )
        #expect(members.pageToken == "t1" && members.maxDistance == 5)
        #expect(try KindredCommand.parseAsRoot(["picks"]) is Picks)
        for bad in [
            ["admin", "seed", "--members", "0"], ["admin", "seed", "--concurrency", "17"],
            ["deck", "--list", "--json"],
            ["deck", "--limit", "51"], ["picks", "--limit", "11"], ["members", "--max-distance", "-1"],
        ] {
            #expect(throws: (any Error).self, "\(bad)") { try KindredCommand.parseAsRoot(bad) }
        }
    }
}
