import KindredProto
import KindredServiceKit

/// How a stored profile looks to its owner, to another member (a card) and to discovery (a snapshot), and whether
/// it may be shown. Pure functions of the record and its community.
enum ProfileViews {
    typealias Settings = Kindred.Common.V1.CommunitySettings

    struct Eligibility: Sendable, Hashable {
        var missing: [String]
        var eligible: Bool
    }

    static func eligibility(_ record: ProfileRecord, settings: Settings) -> Eligibility {
        let missing = ProfileRules.missingRequirements(
            record.fields, settings: settings, photoCount: record.photos.count, locationSet: record.locationCell != nil)
        return Eligibility(missing: missing, eligible: missing.isEmpty && !record.fields.paused && !record.deactivated)
    }

    static func age(_ record: ProfileRecord, today: Kindred.Common.V1.CalendarDate) -> Int32 {
        record.fields.birthDate.flatMap { ProfileRules.age(of: $0, on: today) }.map(Int32.init) ?? 0
    }

    /// The owner's view (also admins' and services').
    static func owner(
        _ record: ProfileRecord, settings: Settings, today: Kindred.Common.V1.CalendarDate, media: MediaLinks? = nil
    ) -> Kindred.Profile.V1.Profile {
        let eligibility = Self.eligibility(record, settings: settings)
        return .with {
            $0.userId = record.userID
            $0.communityId = record.communityID
            $0.fields = record.fields
            $0.photos = record.photos.map(media.photo)
            $0.ageYears = Self.age(record, today: today)
            $0.locationSet = record.locationCell != nil
            $0.locationUpdatedUnixMs = record.locationUpdatedUnixMs
            $0.eligible = eligibility.eligible
            $0.missingRequirements = eligibility.missing
            $0.version = record.version
            $0.createdUnixMs = record.createdUnixMs
            $0.updatedUnixMs = record.updatedUnixMs
        }
    }

    /// The card another member sees: age, never the birth date; no location; the distance between the viewer's
    /// and the member's published positions, as the deck shows it (`PublishedLocation`; 0 when either side has no
    /// location or the owner hides it).
    static func card(
        _ record: ProfileRecord,
        settings: Settings,
        viewer: PublishedPoint?,
        location: PublishedLocation,
        today: Kindred.Common.V1.CalendarDate,
        media: MediaLinks? = nil
    ) -> Kindred.Profile.V1.ProfileCard {
        .with {
            $0.userId = record.userID
            $0.displayName = record.fields.displayName
            $0.ageYears = Self.age(record, today: today)
            $0.gender = settings.genderMatching ? record.fields.gender : .unspecified
            $0.bio = record.fields.bio
            $0.attributes = record.fields.attributes
            $0.photos = record.photos.map(media.photo)
            $0.interests = record.fields.interests
            $0.jobTitle = record.fields.jobTitle
            $0.city = record.fields.city
            if !record.fields.hideDistance, let viewer,
                let member = location.point(userID: record.userID, cell: record.locationCell)
            {
                $0.distanceKm = Int32(PublishedLocation.kilometres(viewer, member))
            }
            $0.version = record.cardVersion  // not moved by location updates: polling it tells nothing
        }
    }

    /// Discovery's snapshot (internal: carries the precision-6 cell).
    static func snapshot(_ record: ProfileRecord, settings: Settings) -> Kindred.Common.V1.CandidateSnapshot {
        let eligibility = Self.eligibility(record, settings: settings)
        let shared = Set(settings.attributeDefinitions.filter { $0.filterable || $0.rankingFeature }.map(\.key))
        return .with {
            $0.userId = record.userID
            $0.communityId = record.communityID
            $0.eligible = eligibility.eligible
            $0.birthDate = record.fields.birthDate
            $0.gender = settings.genderMatching ? record.fields.gender : .unspecified
            $0.interestedIn = settings.genderMatching ? record.fields.interestedIn : []
            $0.ageMinYears = record.fields.ageMinYears == 0 ? settings.minAgeYears : record.fields.ageMinYears
            $0.ageMaxYears = record.fields.ageMaxYears == 0 ? 120 : record.fields.ageMaxYears
            $0.maxDistanceKm =
                record.fields.maxDistanceKm == 0 ? settings.defaultRadiusKm : record.fields.maxDistanceKm
            $0.geohashCell = record.locationCell.map { String($0.prefix(LocationRules.sharedPrecision)) } ?? ""
            $0.attributes = record.fields.attributes.filter { shared.contains($0.key) }
            $0.photoCount = Int32(record.photos.count)
            $0.hideDistance = record.fields.hideDistance
            $0.version = record.version
            $0.updatedUnixMs = record.updatedUnixMs
        }
    }

    /// How `viewer` (a member of `viewerCommunity`) stands to `record`'s owner, from what profile holds: the
    /// community, the account state, eligibility (complete, not paused), blocks either way and the pair's match;
    /// and `withinPreferences`, discovery's card check (``CandidateCheck``: the viewer's deck could show the member, or
    /// the member liked the viewer, whose card the likes received shows), true where it was not asked.
    static func relation(
        _ record: ProfileRecord,
        settings: Settings,
        viewerCommunity: String,
        relations: PairRelations,
        withinPreferences: Bool = true
    ) -> MemberRelation {
        MemberRelation(
            MemberRelation.Facts(
                sameCommunity: record.communityID == viewerCommunity,
                deactivated: record.deactivated,
                eligible: Self.eligibility(record, settings: settings).eligible,
                withinPreferences: withinPreferences,
                blockedByViewer: relations.blocked.contains(record.userID),
                blockedByMember: relations.blockedBy.contains(record.userID),
                match: relations.match(with: record.userID)))
    }

    /// Whether the card check (preferences) decides if `viewer` sees `record`'s card: the owner's own card is
    /// not checked, and the check matters only where the policy would show the card within preferences and not
    /// outside them (not for a match, nor for a member already hidden for another reason).
    static func needsCardCheck(
        _ record: ProfileRecord,
        settings: Settings,
        viewer: String,
        viewerCommunity: String,
        relations: PairRelations
    ) -> Bool {
        if record.userID == viewer { return false }
        let within = Self.relation(record, settings: settings, viewerCommunity: viewerCommunity, relations: relations)
        let outside = Self.relation(
            record, settings: settings, viewerCommunity: viewerCommunity, relations: relations,
            withinPreferences: false)
        return VisibilityPolicy.allows(.card, within) && !VisibilityPolicy.allows(.card, outside)
    }

    /// Whether `viewer` may see `record`'s card (and so its photos): as ``VisibilityPolicy`` says for their
    /// relation. The owner always sees their own card.
    static func isVisible(
        _ record: ProfileRecord,
        settings: Settings,
        viewer: String,
        viewerCommunity: String,
        relations: PairRelations,
        withinPreferences: Bool = true
    ) -> Bool {
        if record.userID == viewer { return true }
        return VisibilityPolicy.allows(
            .card,
            Self.relation(
                record, settings: settings, viewerCommunity: viewerCommunity, relations: relations,
                withinPreferences: withinPreferences))
    }
}
