import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// Lists whose items the gateway turns into profile cards answer at most `CardPage.maxCards` (50) a page,
/// whatever page size is asked, so a page stays under the 4 MiB message limit (services/README.md).
@Suite struct CardPageSizeTests {
    @Test func matchesAndLikesReceivedComeFiftyAPageWithANextPageToken() async throws {
        try await MatchHarness.with { h in
            try await h.community("fans", mode: .oneWay)
            let m = try await h.members(56, community: "fans")
            for follower in m.dropFirst() { _ = try await h.swipe(follower, m[0], .like) }
            let likes = try await h.call(M.listLikesReceived, .with { $0.pageSize = 100 }, token: m[0].token)
            #expect(likes.likes.count == CardPage.maxCards && !likes.nextPageToken.isEmpty && likes.totalCount == 55)
            let moreLikes = try await h.call(
                M.listLikesReceived,
                .with {
                    $0.pageSize = 100
                    $0.pageToken = likes.nextPageToken
                },
                token: m[0].token
            )
            #expect(moreLikes.likes.count == 5 && moreLikes.nextPageToken.isEmpty)
            #expect(Set(likes.likes.map(\.userId) + moreLikes.likes.map(\.userId)).count == 55)

            let matches = try await h.call(M.listMatches, .with { $0.pageSize = 100 }, token: m[0].token)
            #expect(matches.matches.count == CardPage.maxCards && !matches.nextPageToken.isEmpty)
            let moreMatches = try await h.call(
                M.listMatches,
                .with {
                    $0.pageSize = 100
                    $0.pageToken = matches.nextPageToken
                },
                token: m[0].token
            )
            #expect(moreMatches.matches.count == 5 && moreMatches.nextPageToken.isEmpty)
        }
    }
}
