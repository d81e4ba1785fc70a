import Foundation
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// Profile's lists stay under the 4 MiB message limit whatever members wrote: ListProfileIndexEntries (discovery's
/// and match's backfill) pages by bytes as well as by count, as its snapshots carry filterable attributes (500 of
/// 14 KB would pass 4 MiB); GetProfiles takes at most 50 ids (100 cards at the caps are 4.8 MB).
@Suite struct IndexPageTests {
    @Test func getProfilesTakesAtMostFiftyIds() async throws {
        try await ProfileHarness.with { h in
            let viewer = h.user()
            let ids = (0..<51).map { _ in UUID().uuidString.lowercased() }
            let fifty = try await h.client.unary(
                P.getProfiles,
                .with { $0.userIds = Array(ids.prefix(50)) },
                metadata: viewer.metadata
            )
            #expect(fifty.missingUserIds.count == 50)
            #expect(
                await statusCode {
                    _ = try await h.client.unary(P.getProfiles, .with { $0.userIds = ids }, metadata: viewer.metadata)
                } == .invalidArgument
            )
        }
    }

    @Test func aPageStopsBeforeThreeMebibytesAndTheNextOneContinues() async throws {
        try await ProfileHarness.with { h in
            let admin = h.user(admin: true)
            let definitions: [Kindred.Common.V1.AttributeDefinition] = (0..<7).map { index in
                .with {
                    $0.key = "t\(index)"
                    $0.label = "T\(index)"
                    $0.attributeType = .text
                    $0.maxLength = 500
                    $0.filterable = true
                }
            }
            _ = try await h.client.unary(
                C.createCommunity,
                .with {
                    $0.communityId = "wordy"
                    $0.displayName = "Wordy"
                    $0.settings = .with {
                        $0.mode = .mutual
                        $0.attributeDefinitions = definitions
                    }
                },
                metadata: admin.metadata
            )
            let long = String(repeating: "😀", count: 500)  // 2,000 bytes: seven of them are 14 KB a snapshot
            var fields = ProfileHarness.fields()
            fields.attributes = definitions.map { definition in
                .with {
                    $0.key = definition.key
                    $0.value = .textValue(long)
                }
            }
            let members = 240  // 240 × 14 KB = 3.4 MB
            for _ in 0..<members { try await h.createProfile(h.user("wordy"), fields) }
            var request = Kindred.Profile.V1.ListProfileIndexEntriesRequest()
            request.communityId = "wordy"
            request.includeIneligible = true
            request.pageSize = 1000
            let first = try await h.client.unary(P.listProfileIndexEntries, request, metadata: h.service("discovery"))
            #expect(try first.serializedBytes().count <= CardPage.maxPageBytes)
            #expect(first.entries.count < members && !first.nextPageToken.isEmpty)
            request.pageToken = first.nextPageToken
            let second = try await h.client.unary(P.listProfileIndexEntries, request, metadata: h.service("discovery"))
            #expect(second.nextPageToken.isEmpty)
            #expect(Set((first.entries + second.entries).map(\.userId)).count == members)
        }
    }
}
