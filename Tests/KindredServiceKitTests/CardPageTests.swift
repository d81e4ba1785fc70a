import KindredProto
import KindredServiceKit
import Testing

/// The byte arithmetic of list pages (services/README.md, "Text and page limits"): the largest card the rules
/// allow, built field by field, fits `CardPage.maxCardBytes`, and `maxCards` of them with a last message each
/// fit the 4 MiB message limit.
@Suite struct CardPageTests {
    typealias Api = Kindred.Api.V1

    static func text(bytes: Int) -> String { String(repeating: "😀", count: bytes / 4) }

    /// Profile fields of exactly the per-field caps, attributes added until one more would pass the fields' cap.
    static func largestFields() throws -> Api.ProfileFields {
        var fields = Api.ProfileFields()
        fields.displayName = Self.text(bytes: TextRule.displayName.maxBytes)
        fields.bio = Self.text(bytes: TextRule.bio.maxBytes)
        fields.jobTitle = Self.text(bytes: TextRule.jobOrCity.maxBytes)
        fields.city = Self.text(bytes: TextRule.jobOrCity.maxBytes)
        fields.interests = (0..<10).map { _ in Self.text(bytes: TextRule.interest.maxBytes) }
        for index in 0..<32 {
            var candidate = fields
            candidate.attributes.append(
                .with {
                    $0.key = "attribute_\(index)_" + String(repeating: "k", count: 18)
                    $0.value = .textValue(Self.text(bytes: TextRule.attributeText(maxLength: 500).maxBytes))
                }
            )
            guard try candidate.serializedBytes().count <= CardPage.maxProfileFieldsBytes else { break }
            fields = candidate
        }
        return fields
    }

    static func largestCard() throws -> Api.ProfileCard {
        let fields = try Self.largestFields()
        let base = "https://" + String(repeating: "c", count: CardPage.maxMediaBaseURLBytes - 8)
        let photoID = "0190a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b"
        let photo = Api.Photo.with {
            $0.photoId = photoID
            $0.position = 8
            $0.version = .max
            $0.width = 1080
            $0.height = 1350
            $0.urls = (0..<8).map { index in
                .with {
                    $0.variant = .icon
                    $0.format = "webp"
                    $0.url =
                        base + "/media/v1/\(photoID)/\(Int64.max)/\(index % 4 + 1).webp?exp=9999999999&sig="
                        + String(repeating: "s", count: 43)
                    $0.width = 1080
                    $0.height = 1350
                    $0.expiresUnix = 9_999_999_999
                }
            }
        }
        return .with {
            $0.userId = photoID
            $0.displayName = fields.displayName
            $0.ageYears = 120
            $0.gender = .nonbinary
            $0.bio = fields.bio
            $0.attributes = fields.attributes
            $0.photos = Array(repeating: photo, count: 9)
            $0.distanceKm = 20_000
            $0.version = .max
            $0.interests = fields.interests
            $0.jobTitle = fields.jobTitle
            $0.city = fields.city
        }
    }

    @Test func theLargestCardFits() throws {
        let card = try Self.largestCard()
        #expect(try card.serializedBytes().count <= CardPage.maxCardBytes)
        let deckCard = Api.DeckCard.with {
            $0.profile = card
            $0.sharedAttributeKeys = (0..<10).map { _ in String(repeating: "k", count: 32) }
            $0.topPick = true
        }
        #expect(try deckCard.serializedBytes().count <= CardPage.maxCardBytes)
        let summary = Api.MatchSummary.with {
            $0.matchId = card.userId
            $0.direction = .incoming
            $0.createdUnixMs = .max
            $0.profile = card
            $0.lastMessage = .with {
                $0.messageId = card.userId
                $0.threadId = card.userId
                $0.senderUserId = card.userId
                $0.clientMessageId = String(repeating: "m", count: 64)
                $0.body = Self.text(bytes: TextRule.messageBody.maxBytes)
                $0.sequence = .max
                $0.sentUnixMs = .max
            }
            $0.unreadCount = .max
        }
        #expect(try summary.serializedBytes().count <= CardPage.maxCardBytes + CardPage.maxMessageBytes)
    }

    @Test func aFullPageFitsTheMessageLimit() {
        // Deck and search pages: cards; matches, likes received and chat threads: a card and a last message.
        #expect(CardPage.maxCards * (CardPage.maxCardBytes + CardPage.maxMessageBytes) < CardPage.messageLimitBytes)
        // Chat history: 100 messages.
        #expect(100 * CardPage.maxMessageBytes < CardPage.messageLimitBytes)
        // The old page size of 100 cards would not have fit.
        #expect(100 * (CardPage.maxCardBytes + CardPage.maxMessageBytes) > CardPage.messageLimitBytes)
    }
}
