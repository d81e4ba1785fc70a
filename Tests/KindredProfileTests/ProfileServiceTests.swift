import Foundation
import KindredGRPC
@testable import KindredProfile
import KindredProto
import KindredServiceKit
import Testing

@Suite(.serialized) struct ProfileServiceTests {
    @Test func createReadUpdateAndImmutableFields() async throws {
        try await ProfileHarness.with { h in
            let ada = h.user("dating")
            var fields = h.datingFields("  Ada  ")
            fields.interests = ["Hiking", "hiking", "Jazz"]
            let created = try await h.client.unary(
                P.createProfile, .with { $0.fields = fields; $0.idempotencyKey = "k-1" }, metadata: ada.metadata
            ).profile!
            #expect(created.fields!.displayName == "Ada" && created.fields!.interests == ["hiking", "jazz"])
            #expect(created.version == 1 && !created.eligible && created.missingRequirements == ["photos"])
            #expect(created.ageYears >= 36 && created.communityId == "dating")
            // The same key returns the first profile; without it the second create is ALREADY_EXISTS.
            let again = try await h.client.unary(
                P.createProfile, .with { $0.fields = fields; $0.idempotencyKey = "k-1" }, metadata: ada.metadata)
            #expect(again.profile!.createdUnixMs == created.createdUnixMs)
            #expect(await statusCode { _ = try await h.createProfile(ada, fields) } == .alreadyExists)

            let updated = try await h.client.unary(
                P.updateProfile,
                .with {
                    $0.fields = .with { $0.bio = "New bio"; $0.jobTitle = "Pilot" }
                    $0.updatePaths = ["bio", "job_title"]
                    $0.expectedVersion = 1
                }, metadata: ada.metadata
            ).profile!
            #expect(updated.fields!.bio == "New bio" && updated.fields!.jobTitle == "Pilot" && updated.version == 2)
            for path in ["display_name", "birth_date"] {
                #expect(
                    await failureReason {
                        _ = try await h.client.unary(
                            P.updateProfile, .with { $0.updatePaths = [path] }, metadata: ada.metadata)
                    } == "IMMUTABLE_FIELD")
            }
            #expect(
                await failureReason {
                    _ = try await h.client.unary(
                        P.updateProfile, .with { $0.updatePaths = ["bio"]; $0.expectedVersion = 1 },
                        metadata: ada.metadata)
                } == "VERSION_MISMATCH")
            let own = try await h.client.unary(P.getProfile, .init(), metadata: ada.metadata).profile!
            #expect(own.version == 2 && own.fields!.birthDate == ProfileHarness.date(1990, 5, 17))
            #expect(try await h.outboxTypes(ada.id) == ["profile.updated", "profile.updated"])
            // Too young for the community: FAILED_PRECONDITION, nothing stored.
            let teen = h.user("dating")
            let year = Int32(Calendar(identifier: .gregorian).component(.year, from: Date())) - 16
            #expect(await failureReason { _ = try await h.createProfile(teen, ProfileHarness.fields(born: year)) } == "BELOW_MINIMUM_AGE")
            #expect(await statusCode { _ = try await h.client.unary(P.getProfile, .init(), metadata: teen.metadata) } == .notFound)
        }
    }

    @Test func aProfileInEachCommunityWithItsAttributes() async throws {
        try await ProfileHarness.with { h in
            func value(_ key: String, _ value: Kindred.Common.V1.AttributeValue.Value) -> Kindred.Common.V1.AttributeValue {
                .with { $0.key = key; $0.value = value }
            }
            let attributes: [String: [Kindred.Common.V1.AttributeValue]] = [
                "dating": [],
                "bizmatch": [
                    value("business_field", .choiceValue("finance")), value("company", .textValue("Acme")),
                    value("years_experience", .integerValue(12)), value("role", .choiceValue("investor")),
                ],
                "playdates": [
                    value("dog_name", .textValue("Rex")), value("breed", .textValue("Beagle")),
                    value("weight_kg", .integerValue(11)),
                    value("personality", .choiceValues(.with { $0.values = ["playful", "curious"] })),
                ],
                "fitness": [value("activities", .choiceValues(.with { $0.values = ["running", "yoga"] }))],
            ]
            for (community, values) in attributes {
                var fields = ProfileHarness.fields()
                fields.attributes = values
                fields.bio = "About me"
                let profile = try await h.createProfile(h.user(community), fields)
                #expect(Set(profile.fields!.attributes.map(\.key)) == Set(values.map(\.key)), "\(community)")
                #expect(profile.communityId == community)
            }
            // A bizmatch attribute in the dating community is refused.
            var wrong = ProfileHarness.fields()
            wrong.attributes = attributes["bizmatch"]!
            #expect(await statusCode { _ = try await h.createProfile(h.user("dating"), wrong) } == .invalidArgument)
            // fitness needs nothing more: eligible at once.
            let member = try await h.createProfile(h.user("fitness"))
            #expect(member.eligible)
        }
    }

    @Test func cardsFollowVisibilityBlocksAndAccountState() async throws {
        try await ProfileHarness.with { h in
            let ada = h.user("dating")
            let bob = h.user("dating")
            let eve = h.user("bizmatch")
            try await h.createProfile(ada, h.datingFields("Ada"))
            try await h.createProfile(bob, h.datingFields("Bob"))
            try await h.createProfile(eve)
            try await h.addPhotoRows(ada.id, count: 2)
            func cards(_ viewer: ProfileHarness.User, _ ids: [String]) async throws -> V1.GetProfilesResponse {
                try await h.client.unary(P.getProfiles, .with { $0.userIds = ids }, metadata: viewer.metadata)
            }
            let unknown = UUID().uuidString.lowercased()
            var seen = try await cards(bob, [unknown, ada.id, bob.id])
            #expect(seen.profiles.map(\.userId) == [ada.id, bob.id] && seen.missingUserIds == [unknown])
            #expect(seen.profiles[0].ageYears >= 36 && seen.profiles[0].displayName == "Ada")
            // Ada's card is invisible to another community; Bob (no photos) is invisible to Ada.
            #expect(try await cards(eve, [ada.id]).missingUserIds == [ada.id])
            #expect(try await cards(ada, [bob.id]).missingUserIds == [bob.id])

            func deliver(_ producer: String, _ user: String, _ payload: Kindred.Common.V1.Event.Payload) async throws {
                let event = Kindred.Common.V1.Event.with {
                    $0.eventId = try! UUIDv7.generate()
                    $0.producer = producer
                    $0.userId = user
                    $0.communityId = "dating"
                    $0.sequence = Int64(Date().timeIntervalSince1970 * 1000)
                    $0.payload = payload
                }
                let response = try await h.client.unary(
                    P.deliverEvents, .with { $0.events = [event] }, metadata: h.service(producer))
                #expect(response.acknowledgedEventIds == [event.eventId])
            }
            try await deliver("match", ada.id, .userBlocked(.with { $0.blockedUserId = bob.id }))
            #expect(try await cards(bob, [ada.id]).missingUserIds == [ada.id])
            try await deliver("match", ada.id, .userUnblocked(.with { $0.unblockedUserId = bob.id }))
            #expect(try await cards(bob, [ada.id]).profiles.count == 1)
            try await deliver("auth", ada.id, .accountDeactivated(.init()))
            #expect(try await cards(bob, [ada.id]).missingUserIds == [ada.id])
            try await deliver("auth", ada.id, .accountReactivated(.init()))
            seen = try await cards(bob, [ada.id])
            #expect(seen.profiles.count == 1)
            // Auth may not send match's events (and vice versa): acknowledged without effect.
            try await deliver("auth", ada.id, .userBlocked(.with { $0.blockedUserId = bob.id }))
            #expect(try await cards(bob, [ada.id]).profiles.count == 1)
            // A match keeps an ineligible card visible to the other side only (Bob has no photos), not across a
            // block; once the match ends, or if it ended before its MatchCreated arrived, Bob is hidden again.
            let pair = [ada.id, bob.id].sorted()
            let matchID = try UUIDv7.generate()
            try await deliver("auth", ada.id, .matchCreated(.with { $0.matchId = matchID; $0.userIds = pair }))
            #expect(try await cards(ada, [bob.id]).missingUserIds == [bob.id], "only match's events count")
            try await deliver("match", ada.id, .matchCreated(.with { $0.matchId = matchID; $0.userIds = pair }))
            #expect(try await cards(ada, [bob.id]).profiles.map(\.userId) == [bob.id])
            let carl = h.user("dating")
            try await h.createProfile(carl, h.datingFields("Carl"))
            try await h.addPhotoRows(carl.id, count: 2)
            #expect(try await cards(carl, [bob.id]).missingUserIds == [bob.id], "not matched with Carl")
            try await deliver("match", bob.id, .userBlocked(.with { $0.blockedUserId = ada.id }))
            #expect(try await cards(ada, [bob.id]).missingUserIds == [bob.id], "a block wins over a match")
            try await deliver("match", bob.id, .userUnblocked(.with { $0.unblockedUserId = ada.id }))
            try await deliver("match", bob.id, .matchEnded(.with { $0.matchId = matchID; $0.userIds = pair }))
            #expect(try await cards(ada, [bob.id]).missingUserIds == [bob.id])
            // An ended match hides both sides for good, eligible or not (the policy's `unmatched`: exactly as a
            // block, which it must not be told from).
            #expect(try await cards(bob, [ada.id]).missingUserIds == [ada.id], "an unmatch hides as a block does")
            let late = try UUIDv7.generate()
            try await deliver("match", ada.id, .matchEnded(.with { $0.matchId = late; $0.userIds = pair }))
            try await deliver("match", ada.id, .matchCreated(.with { $0.matchId = late; $0.userIds = pair }))
            #expect(try await cards(ada, [bob.id]).missingUserIds == [bob.id], "an ended match stays ended")
            #expect(try await cards(carl, [ada.id]).profiles.count == 1, "others still see Ada")
            #expect(try await h.footprint(bob.id)["matches"] == 1, "the ended pair, until either member is erased")
            // 101 ids or duplicates are refused.
            #expect(await statusCode { _ = try await cards(bob, [ada.id, ada.id]) } == .invalidArgument)
            #expect(await statusCode { _ = try await cards(bob, (0...100).map { "u\($0)" }) } == .invalidArgument)
        }
    }

    @Test func locationIsSnappedRateLimitedAndCheckedForJumps() async throws {
        try await ProfileHarness.with { h in
            let ada = h.user("dating")
            try await h.createProfile(ada)
            func locate(_ latitude: Double, _ longitude: Double) async throws -> V1.UpdateLocationResponse {
                try await h.client.unary(
                    P.updateLocation,
                    .with { $0.location = .with { $0.latitudeDeg = latitude; $0.longitudeDeg = longitude } },
                    metadata: ada.metadata)
            }
            for (latitude, longitude) in [(Double.nan, 0.0), (0, Double.infinity), (91, 0), (0, -181)] {
                #expect(await statusCode { _ = try await locate(latitude, longitude) } == .invalidArgument)
            }
            let first = try await locate(48.8566, 2.3522)
            #expect(first.cellChanged && first.nextUpdateAllowedUnixMs == first.locationUpdatedUnixMs + 1000)
            #expect(await statusCode { _ = try await locate(48.8566, 2.3522) } == .resourceExhausted)
            let stored = try await h.database.query("SELECT cell FROM locations WHERE user_id = \(ada.id)")
            #expect(try stored[0].decode(String.self, at: 0) == "u09tvw0")
            try await Task.sleep(for: .milliseconds(1100))
            #expect(await failureReason { _ = try await locate(40.71, -74.0) } == "IMPLAUSIBLE_LOCATION_JUMP")
            let profile = try await h.client.unary(P.getProfile, .init(), metadata: ada.metadata).profile!
            #expect(profile.locationSet && profile.locationUpdatedUnixMs == first.locationUpdatedUnixMs)
            #expect(try await h.outboxTypes(ada.id).contains("profile.location_changed"))
        }
    }

    @Test func anotherUsersIdsNeverSucceed() async throws {
        try await ProfileHarness.with { h in
            let ada = h.user("dating")
            let mallory = h.user("dating")
            try await h.createProfile(ada, h.datingFields("Ada"))
            try await h.createProfile(mallory)
            let calls: [(String, () async throws -> Void)] = [
                ("GetProfile", { _ = try await h.client.unary(P.getProfile, .with { $0.userId = ada.id }, metadata: mallory.metadata) }),
                ("UpdateProfile", {
                    _ = try await h.client.unary(
                        P.updateProfile, .with { $0.userId = ada.id; $0.updatePaths = ["bio"] }, metadata: mallory.metadata)
                }),
                ("GetProfiles as Ada", {
                    _ = try await h.client.unary(
                        P.getProfiles, .with { $0.viewerUserId = ada.id; $0.userIds = [ada.id] }, metadata: mallory.metadata)
                }),
                ("GetUserFootprint", {
                    _ = try await h.client.unary(P.getUserFootprint, .with { $0.userId = ada.id }, metadata: mallory.metadata)
                }),
                ("ListProfileIndexEntries", {
                    _ = try await h.client.unary(P.listProfileIndexEntries, .init(), metadata: mallory.metadata)
                }),
                ("DeliverEvents", {
                    _ = try await h.client.unary(P.deliverEvents, .init(), metadata: mallory.metadata)
                }),
                ("ListCommunities", { _ = try await h.client.unary(C.listCommunities, .init(), metadata: mallory.metadata) }),
                ("CreateCommunity", {
                    _ = try await h.client.unary(
                        C.createCommunity, .with { $0.communityId = "evil"; $0.displayName = "Evil" }, metadata: mallory.metadata)
                }),
                ("UpdateCommunity", {
                    _ = try await h.client.unary(
                        C.updateCommunity,
                        .with { $0.communityId = "dating"; $0.displayName = "Evil"; $0.updatePaths = ["display_name"] },
                        metadata: mallory.metadata)
                }),
                ("GetProfile without token", { _ = try await h.client.unary(P.getProfile, .with { $0.userId = ada.id }) }),
                ("DeliverEvents from discovery", {
                    _ = try await h.client.unary(P.deliverEvents, .init(), metadata: h.service("discovery"))
                }),
            ]
            var successes: [String] = []
            for (name, call) in calls {
                let code = await statusCode(call)
                if code == nil { successes.append(name) }
                #expect(code == .permissionDenied || code == .unauthenticated || code == .notFound, "\(name): \(String(describing: code))")
            }
            #expect(successes.isEmpty)
            // Nothing changed.
            let own = try await h.client.unary(P.getProfile, .init(), metadata: ada.metadata).profile!
            #expect(own.version == 1 && own.fields!.bio == "Hi")
            let community = try await h.client.unary(C.getCommunity, .with { $0.communityId = "dating" }).community!
            #expect(community.displayName == "Dating" && community.version == 1)
        }
    }

    @Test func accountDeletionErasesEverything() async throws {
        let folder = NSTemporaryDirectory() + "kindred-profile-photos-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await ProfileHarness.with(settings: ["KINDRED_PROFILE_PHOTO_DIR": folder]) { h in
            let ada = h.user("bizmatch")
            var fields = ProfileHarness.fields()
            fields.attributes = [.with { $0.key = "role"; $0.value = .choiceValue("startup") }]
            try await h.createProfile(ada, fields)
            _ = try await h.client.unary(
                P.updateLocation, .with { $0.location = .with { $0.latitudeDeg = 52.52; $0.longitudeDeg = 13.4 } },
                metadata: ada.metadata)
            // A photo with one rendition whose bytes are in the folder store.
            try await h.addPhotoRows(ada.id, count: 1)
            let bytes: [UInt8] = Array("not really a jpeg".utf8)
            let key = PhotoBlobKey.of(bytes)
            try await h.profile.server.blobs.put(key: key, bytes: bytes)
            try await h.database.execute(
                """
                INSERT INTO photo_variants (photo_id, variant, format, width, height, byte_size, blob_key)
                SELECT id, 2, 'jpeg', 640, 800, \(Int32(bytes.count)), \(key) FROM photos WHERE user_id = \(ada.id)
                """)
            try await h.client.unary(
                P.deliverEvents,
                .with {
                    $0.events = [
                        .with { $0.eventId = try! UUIDv7.generate(); $0.producer = "match"; $0.userId = ada.id; $0.sequence = 1; $0.payload = .userBlocked(.with { $0.blockedUserId = "x" }) },
                        .with { $0.eventId = try! UUIDv7.generate(); $0.producer = "match"; $0.userId = ada.id; $0.sequence = 2; $0.payload = .matchCreated(.with { $0.matchId = try! UUIDv7.generate(); $0.userIds = [ada.id, "z"] }) },
                    ]
                }, metadata: h.service("match"))
            let before = try await h.footprint(ada.id)
            #expect(before["profiles"] == 1 && before["photo_files"] == 1 && before["locations"] == 1 && before["blocks"] == 1)
            #expect(before["matches"] == 1)
            #expect(before["attribute_values"] == 1 && before["photo_variants"] == 1)
            let deleted = Kindred.Common.V1.Event.with {
                $0.eventId = try! UUIDv7.generate()
                $0.producer = "auth"
                $0.userId = ada.id
                $0.sequence = 7
                $0.payload = .accountDeleted(.init())
            }
            for _ in 0..<2 {  // redelivery is harmless
                let response = try await h.client.unary(P.deliverEvents, .with { $0.events = [deleted] }, metadata: h.service("auth"))
                #expect(response.acknowledgedEventIds == [deleted.eventId])
            }
            let after = try await h.footprint(ada.id)
            #expect(after.values.allSatisfy { $0 == 0 }, "\(after)")
            #expect(try FolderPhotoBlobStorage(root: folder).fileCount() == 0)
            #expect(await statusCode { _ = try await h.client.unary(P.getProfile, .init(), metadata: ada.metadata) } == .notFound)
        }
    }

    /// Raising a community's photo minimum makes its members ineligible: every member of that community (and only
    /// that community) is re-announced with a new version and eligible = false, so discovery and match follow
    /// without waiting for each member's next edit.
    @Test func aCommunityChangeReannouncesEveryMember() async throws {
        try await ProfileHarness.with { h in
            let admin = h.user("dating", admin: true)
            var members: [ProfileHarness.User] = []
            for name in ["Ada", "Bea", "Cy"] {
                let member = h.user("dating")
                try await h.createProfile(member, h.datingFields(name))
                try await h.addPhotoRows(member.id, count: 2)
                members.append(member)
            }
            let elsewhere = h.user("bizmatch")
            try await h.createProfile(elsewhere)
            let before = try await h.database.query(
                "SELECT user_id, version FROM profiles").map { try $0.decode((String, Int64).self) }
            let versions = Dictionary(uniqueKeysWithValues: before)
            _ = try await h.client.unary(
                C.updateCommunity,
                .with {
                    $0.communityId = "dating"
                    $0.settings = .with { $0.minPhotos = 3 }
                    $0.updatePaths = ["settings.min_photos"]
                }, metadata: admin.metadata)
            // The background task works through the job; a direct call does the same work (whichever runs first).
            var announced: [String: Kindred.Common.V1.ProfileUpdated] = [:]
            for _ in 0..<100 where announced.count < members.count {
                _ = try await h.profile.server.profiles.resnapshotNextBatch(limit: 2)
                let rows = try await h.database.query(
                    "SELECT payload FROM events_outbox WHERE event_type = 'profile.updated' ORDER BY id")
                for row in rows {
                    let event = try Kindred.Common.V1.Event(serializedBytes: try row.decode([UInt8].self, at: 0))
                    if case .profileUpdated(let updated)? = event.payload, updated.changedPaths == ["community"] {
                        announced[event.userId] = updated
                    }
                }
                if announced.count < members.count { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(Set(announced.keys) == Set(members.map(\.id)), "each dating member, and no one else")
            for member in members {
                let snapshot = try #require(announced[member.id]?.snapshot)
                #expect(!snapshot.eligible && snapshot.version > versions[member.id]!)
            }
            #expect(try await h.database.query("SELECT count(*) FROM community_resnapshots").scalar(Int.self) == 0)
        }
    }

    @Test func communitiesAreAdministered() async throws {
        try await ProfileHarness.with { h in
            let admin = h.user("dating", admin: true)
            let anonymous = try await h.client.unary(C.getCommunity, .with { $0.communityId = "playdates" }).community!
            #expect(anonymous.settings!.attributeDefinitions.map(\.key) == ["dog_name", "breed", "weight_kg", "personality"])
            // Install again: nothing new.
            #expect(try await CommunityService.install(CommunityPresets.all, database: h.database).isEmpty)
            let invalid = await failureReason {
                _ = try await h.client.unary(
                    C.createCommunity, .with { $0.communityId = "X"; $0.displayName = "X" }, metadata: admin.metadata)
            }
            #expect(invalid == "INVALID_ARGUMENT")
            let created = try await h.client.unary(
                C.createCommunity,
                .with {
                    $0.communityId = "chess"
                    $0.displayName = "Chess"
                    $0.settings = .with { $0.mode = .mutual }
                }, metadata: admin.metadata
            ).community!
            #expect(created.version == 1 && created.settings!.minAgeYears == 18)
            #expect(await statusCode {
                _ = try await h.client.unary(
                    C.createCommunity, .with { $0.communityId = "chess"; $0.displayName = "Chess"; $0.settings = .with { $0.mode = .mutual } },
                    metadata: admin.metadata)
            } == .alreadyExists)
            let updated = try await h.client.unary(
                C.updateCommunity,
                .with {
                    $0.communityId = "chess"
                    $0.settings = .with { $0.minAgeYears = 21 }
                    $0.updatePaths = ["settings.min_age_years"]
                    $0.expectedVersion = 1
                }, metadata: admin.metadata
            ).community!
            #expect(updated.version == 2 && updated.settings!.minAgeYears == 21)
            #expect(await failureReason {
                _ = try await h.client.unary(
                    C.updateCommunity, .with { $0.communityId = "chess"; $0.updatePaths = ["display_name"]; $0.displayName = "C"; $0.expectedVersion = 1 },
                    metadata: admin.metadata)
            } == "VERSION_MISMATCH")
            #expect(try await h.outboxTypes("chess") == ["community.updated", "community.updated"])
            let page = try await h.client.unary(C.listCommunities, .with { $0.pageSize = 3 }, metadata: admin.metadata)
            #expect(page.communities.map(\.communityId) == ["bizmatch", "chess", "dating"] && !page.nextPageToken.isEmpty)
            let rest = try await h.client.unary(
                C.listCommunities, .with { $0.pageSize = 3; $0.pageToken = page.nextPageToken }, metadata: h.service("match"))
            #expect(rest.communities.map(\.communityId) == ["fitness", "playdates"] && rest.nextPageToken.isEmpty)
            // Index entries for discovery.
            try await h.createProfile(h.user("fitness"))
            let index = try await h.client.unary(
                P.listProfileIndexEntries, .with { $0.communityId = "fitness" }, metadata: h.service("discovery"))
            #expect(index.entries.count == 1 && index.entries[0].eligible)
        }
    }
}

@Suite struct PhotoBlobStorageTests {
    func exercise(_ storage: any PhotoBlobStorage) async throws {
        let bytes: [UInt8] = (0..<5000).map { UInt8($0 % 251) }
        let key = PhotoBlobKey.of(bytes)
        #expect(try await storage.get(key: key) == nil)
        try await storage.put(key: key, bytes: bytes)
        try await storage.put(key: key, bytes: bytes)  // idempotent
        #expect(try await storage.get(key: key) == bytes)
        #expect(try await storage.count(keys: [key, PhotoBlobKey.of([1])]) == 1)
        try await storage.delete(keys: [key, PhotoBlobKey.of([1])])
        #expect(try await storage.get(key: key) == nil)
        #expect(try await storage.count(keys: [key]) == 0)
    }

    @Test func folder() async throws {
        let folder = NSTemporaryDirectory() + "kindred-blobs-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let storage = try FolderPhotoBlobStorage(root: folder)
        try await self.exercise(storage)
        #expect(storage.fileCount() == 0)
        await #expect(throws: (any Error).self) { try await storage.put(key: "../../etc/passwd", bytes: [1]) }
    }

    @Test func postgres() async throws {
        try await ProfileHarness.with { h in
            try await self.exercise(PostgresPhotoBlobStore(database: h.database))
        }
    }
}
