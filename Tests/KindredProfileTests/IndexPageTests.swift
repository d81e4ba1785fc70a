import Foundation
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// ListProfileIndexEntries (discovery's and match's backfill) pages by bytes as well as by count: its snapshots
/// carry filterable attributes, and 500 snapshots of 14 KB each would pass the 4 MiB message limit.
@Suite struct IndexPageTests {
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
                C.createCommunity, .with {
                    $0.communityId = "wordy"
                    $0.displayName = "Wordy"
                    $0.settings = .with {
                        $0.mode = .mutual
                        $0.attributeDefinitions = definitions
                    }
                }, metadata: admin.metadata)
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
