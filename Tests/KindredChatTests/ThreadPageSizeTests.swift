import Foundation
import KindredChat
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// ListThreads' items carry a profile card and a last message: at most `CardPage.maxCards` (50) a page, whatever
/// page size is asked, so a page stays under the 4 MiB message limit (services/README.md).
@Suite struct ThreadPageSizeTests {
    @Test func threadsComeFiftyAPageWithANextPageToken() async throws {
        try await ChatHarness.with { chat in
            let alice = try await chat.user()
            let others = try (0..<55).map { _ in ChatHarness.User(id: try UUIDv7.generate(), token: "") }
            try await chat.deliver(others.map { chat.matchCreated(alice, $0) }, from: "match")
            var request = Kindred.Chat.V1.ListThreadsRequest()
            request.pageSize = 100
            let first = try await chat.client.unary(ChatMethod.listThreads, request, metadata: alice.metadata)
            #expect(first.threads.count == CardPage.maxCards && !first.nextPageToken.isEmpty)
            request.pageToken = first.nextPageToken
            let second = try await chat.client.unary(ChatMethod.listThreads, request, metadata: alice.metadata)
            #expect(second.threads.count == 5 && second.nextPageToken.isEmpty)
        }
    }
}
