import Testing

@testable import KindredNotify

@Suite("Notification texts")
struct NotificationTemplatesTests {
    @Test(arguments: NotificationKind.allCases)
    func everyKindHasTextsInEveryLanguage(kind: NotificationKind) {
        for code in NotificationTemplates.languageCodes {
            let text = NotificationTemplates.render(kind, locale: code, .init(name: "Alex", count: 3))
            #expect(!text.title.isEmpty && !text.body.isEmpty, "\(kind) in \(code)")
        }
        #expect(NotificationTemplates.languageCodes.count >= 2)
    }

    @Test func theLocalesLanguageDecidesAndEnglishIsTheFallback() {
        let facts = NotificationTemplates.Facts(name: "Alex")
        #expect(NotificationTemplates.render(.newMatch, locale: "fr-CA", facts).body == "Vous et Alex vous êtes plu.")
        #expect(NotificationTemplates.render(.newMatch, locale: "en-GB", facts).body == "You and Alex liked each other.")
        #expect(NotificationTemplates.render(.newMatch, locale: "ja-JP", facts).body == "You and Alex liked each other.")
        var connection = facts
        connection.connection = true
        #expect(NotificationTemplates.render(.newMatch, locale: "en", connection).title == "New connection")
    }

    @Test func aMessageShowsItsTextOnlyWhenGiven() {
        let hidden = NotificationTemplates.render(.newMessage, locale: "en", .init(name: "Alex"))
        #expect(hidden == .init(title: "Alex", body: "New message from Alex"))
        let shown = NotificationTemplates.render(.newMessage, locale: "en", .init(name: "Alex", messageText: "Hi there"))
        #expect(shown.body == "Hi there")
    }

    @Test func withoutANameANeutralWord() {
        #expect(NotificationTemplates.render(.newMatch, locale: "en", .init()).body == "You and Someone liked each other.")
        #expect(NotificationTemplates.render(.newMessage, locale: "fr", .init(name: "")).body == "Nouveau message de Quelqu'un")
        #expect(NotificationTemplates.render(.likes, locale: "en", .init(count: 1)).body == "1 person liked you")
    }
}
