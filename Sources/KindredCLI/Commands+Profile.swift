import ArgumentParser
import Foundation
import KindredGRPC
import KindredOpenSSL
import KindredProto

typealias ProfileAPI = Kindred.Api.V1.ProfileService.Method
typealias AdminAPI = Kindred.Api.V1.AdminService.Method

// MARK: kindred profile

/// `kindred profile create|show|edit`.
struct ProfileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile",
        abstract: "Create, show and edit your profile in your community.",
        subcommands: [Create.self, Show.self, Edit.self]
    )

    /// The fields every writing subcommand accepts.
    struct FieldOptions: ParsableArguments {
        @Option(help: "Gender: woman, man or nonbinary.") var gender: String?
        @Option(help: "Genders you want to see (repeat the option).") var interestedIn: [String] = []
        @Option(help: "About you, up to 500 characters.") var bio: String?
        @Option(help: "A one-word interest (repeat the option; replaces the list).") var interest: [String] = []
        @Option(help: "Job title.") var job: String?
        @Option(help: "City shown on your card (not your location).") var city: String?
        @Option(help: ArgumentHelp("A community attribute (repeat the option): key=value; several choices a,b.", valueName: "key=value"))
        var attribute: [String] = []

        /// The fields set by these options, and their update paths.
        func apply(to fields: inout Kindred.Api.V1.ProfileFields, community: Kindred.Common.V1.Community?) throws -> [String] {
            var paths: [String] = []
            if let gender {
                fields.gender = try Self.gender(gender)
                paths.append("gender")
            }
            if !self.interestedIn.isEmpty {
                fields.interestedIn = try self.interestedIn.map(Self.gender)
                paths.append("interested_in")
            }
            if let bio {
                fields.bio = bio
                paths.append("bio")
            }
            if !self.interest.isEmpty {
                fields.interests = self.interest
                paths.append("interests")
            }
            if let job {
                fields.jobTitle = job
                paths.append("job_title")
            }
            if let city {
                fields.city = city
                paths.append("city")
            }
            for text in self.attribute {
                let value = try Self.attribute(text, community: community)
                fields.attributes.append(value)
                paths.append("attributes.\(value.key)")
            }
            return paths
        }

        static func gender(_ text: String) throws -> Kindred.Common.V1.Gender {
            switch text.lowercased() {
            case "woman": .woman
            case "man": .man
            case "nonbinary", "non-binary": .nonbinary
            default: throw CLIError.usage("unknown gender \(text): woman, man or nonbinary")
            }
        }

        /// `key=value` typed by the community's definition of `key`.
        static func attribute(_ text: String, community: Kindred.Common.V1.Community?) throws -> Kindred.Common.V1.AttributeValue {
            let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else { throw CLIError.usage("--attribute takes key=value") }
            guard let definition = community?.settings?.attributeDefinitions.first(where: { $0.key == parts[0] }) else {
                throw CLIError.usage("the community has no attribute \(parts[0]) (see: kindred community show)")
            }
            var value = Kindred.Common.V1.AttributeValue()
            value.key = parts[0]
            switch definition.attributeType {
            case .integer:
                guard let number = Int64(parts[1]) else { throw CLIError.usage("\(parts[0]) takes a whole number") }
                value.value = .integerValue(number)
            case .bool:
                guard let flag = Bool(parts[1]) else { throw CLIError.usage("\(parts[0]) takes true or false") }
                value.value = .boolValue(flag)
            case .singleChoice: value.value = .choiceValue(parts[1])
            case .multiChoice:
                value.value = .choiceValues(.with { $0.values = parts[1].split(separator: ",").map(String.init) })
            default: value.value = .textValue(parts[1])
            }
            return value
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create your profile (name and birth date cannot change later).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Name shown on your card.") var name: String
        @Option(help: ArgumentHelp("Birth date.", valueName: "YYYY-MM-DD")) var birthDate: String
        @OptionGroup var fields: FieldOptions

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let community = try await ProfileCommand.community(invocation)
                var fields = Kindred.Api.V1.ProfileFields()
                fields.displayName = self.name
                fields.birthDate = try ProfileCommand.date(self.birthDate)
                _ = try self.fields.apply(to: &fields, community: community)
                let response = try await invocation.gateway.authenticated(
                    ProfileAPI.createProfile,
                    .with {
                        $0.fields = fields
                        $0.idempotencyKey = UUID().uuidString
                    })
                ProfileCommand.render(response.profile ?? .init()).forEach(Console.out)
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your profile (or another member's card with --user).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Another member's user id: their card as you see it.") var user: String?

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                if let user {
                    let card = try await invocation.gateway.authenticated(ProfileAPI.getProfile, .with { $0.userId = user })
                    ProfileCommand.render(card: card.profile ?? .init()).forEach(Console.out)
                } else {
                    let response = try await invocation.gateway.authenticated(ProfileAPI.getMyProfile, .init())
                    ProfileCommand.render(response.profile ?? .init()).forEach(Console.out)
                }
            }
        }
    }

    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change fields of your profile (only the options given).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var fields: FieldOptions
        @Option(help: "Pause (true) or resume (false) being shown to others.") var paused: Bool?

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let community = self.fields.attribute.isEmpty ? nil : try await ProfileCommand.community(invocation)
                var fields = Kindred.Api.V1.ProfileFields()
                var paths = try self.fields.apply(to: &fields, community: community)
                if let paused {
                    fields.paused = paused
                    paths.append("paused")
                }
                guard !paths.isEmpty else { throw CLIError.usage("nothing to change: give at least one field option") }
                let response = try await invocation.gateway.authenticated(
                    ProfileAPI.updateProfile,
                    .with {
                        $0.fields = fields
                        $0.updatePaths = paths
                    })
                ProfileCommand.render(response.profile ?? .init()).forEach(Console.out)
            }
        }
    }

    static func community(_ invocation: Invocation) async throws -> Kindred.Common.V1.Community? {
        try await invocation.gateway.authenticated(ProfileAPI.getCommunity, .init()).community
    }

    static func date(_ text: String) throws -> Kindred.Common.V1.CalendarDate {
        let parts = text.split(separator: "-").compactMap { Int32($0) }
        guard parts.count == 3 else { throw CLIError.usage("dates are YYYY-MM-DD") }
        return .with {
            $0.year = parts[0]
            $0.month = parts[1]
            $0.day = parts[2]
        }
    }

    static func render(_ profile: Kindred.Api.V1.MyProfile) -> [String] {
        let fields = profile.fields ?? .init()
        var lines = [
            "\(fields.displayName), \(profile.ageYears)  (user \(profile.userId), version \(profile.version))",
            "eligible: \(profile.eligible ? "yes" : "no, missing " + profile.missingRequirements.joined(separator: ", "))",
            "location: \(profile.locationSet ? "set" : "not set")  photos: \(profile.photos.count)",
        ]
        if !fields.bio.isEmpty { lines.append("bio: \(fields.bio)") }
        if !fields.interests.isEmpty { lines.append("interests: \(fields.interests.joined(separator: ", "))") }
        if !fields.jobTitle.isEmpty { lines.append("job: \(fields.jobTitle)") }
        if !fields.city.isEmpty { lines.append("city: \(fields.city)") }
        lines += fields.attributes.map { "\($0.key): \(Self.text($0))" }
        return lines
    }

    static func render(card: Kindred.Api.V1.ProfileCard) -> [String] {
        var lines = ["\(card.displayName), \(card.ageYears)\(card.distanceKm > 0 ? "  \(card.distanceKm) km away" : "")"]
        if !card.bio.isEmpty { lines.append("bio: \(card.bio)") }
        if !card.interests.isEmpty { lines.append("interests: \(card.interests.joined(separator: ", "))") }
        lines += card.attributes.map { "\($0.key): \(Self.text($0))" }
        lines.append("photos: \(card.photos.count)")
        return lines
    }

    static func text(_ value: Kindred.Common.V1.AttributeValue) -> String {
        switch value.value {
        case .textValue(let text)?: text
        case .integerValue(let number)?: "\(number)"
        case .boolValue(let flag)?: "\(flag)"
        case .choiceValue(let choice)?: choice
        case .choiceValues(let list)?: list.values.joined(separator: ", ")
        case nil: ""
        }
    }
}

// MARK: kindred photo

/// `kindred photo add FILE|list|remove ID|reorder ID...`.
struct PhotoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photo",
        abstract: "Add, list, remove and reorder your photos (re-encoded; no metadata such as GPS is kept).",
        subcommands: [Add.self, List.self, Remove.self, Reorder.self, Sample.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Upload a JPEG, PNG, WebP or HEIC file (up to 15 MiB).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The image file.") var file: String

        func run() async throws {
            guard let data = FileManager.default.contents(atPath: self.file) else {
                throw CLIError.usage("cannot read \(self.file)")
            }
            let bytes = [UInt8](data)
            let type: String
            switch (self.file as NSString).pathExtension.lowercased() {
            case "png": type = "image/png"
            case "webp": type = "image/webp"
            case "heic", "heif": type = "image/heic"
            default: type = "image/jpeg"
            }
            try await Invocation.run(self.global) { invocation in
                guard let transport = invocation.gateway.transport as? GRPCGatewayTransport else {
                    throw CLIError.usage("uploads need the gRPC transport")
                }
                let session = try await invocation.gateway.usableSession()
                let response = try await PhotoUpload.upload(
                    transport.client, metadata: GatewayClient.bearer(session), bytes: bytes, contentType: type,
                    idempotencyKey: UUID().uuidString)
                Console.out("Added photo \(response.photo?.photoId ?? "?") (\(response.photos.count) in all).")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your photos in order.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let profile = try await invocation.gateway.authenticated(ProfileAPI.getMyProfile, .init()).profile
                PhotoCommand.render(profile?.photos ?? []).forEach(Console.out)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one of your photos.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The photo id.") var photoID: String

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    ProfileAPI.deletePhoto, .with { $0.photoId = self.photoID })
                PhotoCommand.render(response.photos).forEach(Console.out)
            }
        }
    }

    struct Reorder: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Put your photos in a new order (every id once).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Every photo id, first first.") var photoIDs: [String]

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    ProfileAPI.reorderPhotos, .with { $0.photoIds = self.photoIDs })
                PhotoCommand.render(response.photos).forEach(Console.out)
            }
        }
    }

    static func render(_ photos: [Kindred.Api.V1.Photo]) -> [String] {
        photos.isEmpty
            ? ["No photos."]
            : photos.map { photo in
                let url = photo.urls.first { $0.variant == .full && $0.format == "jpeg" }?.url
                return "\(photo.position)  \(photo.photoId)  \(photo.width)x\(photo.height)  v\(photo.version)\(url.map { "  " + $0 } ?? "")"
            }
    }
}

// MARK: kindred location, kindred community

/// `kindred location set LAT LON`.
struct LocationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "location",
        abstract: "Set your location (stored only as a ~150 m cell, never shown to anyone).",
        subcommands: [Set.self]
    )

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set your location from degrees.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Latitude in degrees, -90..90.") var latitude: Double
        @Argument(help: "Longitude in degrees, -180..180.") var longitude: Double

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let response = try await invocation.gateway.authenticated(
                    ProfileAPI.updateLocation,
                    .with {
                        $0.location = .with {
                            $0.latitudeDeg = self.latitude
                            $0.longitudeDeg = self.longitude
                        }
                    })
                Console.out("Location set; next update allowed at \(Render.time(response.nextUpdateAllowedUnixMs)).")
            }
        }
    }
}

/// `kindred community show [ID]`.
struct CommunityCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "community",
        abstract: "Show a community's configuration.",
        subcommands: [Show.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your community (or the one named).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A community id; default your own.") var id: String?

        func run() async throws {
            try await Invocation.run(self.global) { invocation in
                let request = Kindred.Api.V1.GetCommunityRequest.with { $0.communityId = self.id ?? "" }
                let response =
                    self.id == nil
                    ? try await invocation.gateway.authenticated(ProfileAPI.getCommunity, request)
                    : try await invocation.gateway.call(ProfileAPI.getCommunity, request)
                CommunityCommand.render(response.community ?? .init()).forEach(Console.out)
            }
        }
    }

    static func render(_ community: Kindred.Common.V1.Community) -> [String] {
        let settings = community.settings ?? .init()
        var lines = [
            "\(community.communityId): \(community.displayName) (version \(community.version))",
            "mode: \(settings.mode == .mutual ? "mutual" : "one-way")  gender matching: \(settings.genderMatching)",
            "photos: \(settings.minPhotos)..\(settings.maxPhotos)  minimum age: \(settings.minAgeYears)  radius: \(settings.defaultRadiusKm) km (max \(settings.maxRadiusKm))",
            "required: \(settings.requiredProfileFields.joined(separator: ", "))",
        ]
        for definition in settings.attributeDefinitions {
            let choices = definition.choices.map(\.value).joined(separator: "|")
            lines.append(
                "attribute \(definition.key): \(definition.label)\(definition.required ? " (required)" : "")\(choices.isEmpty ? "" : " [\(choices)]")")
        }
        return lines
    }
}

// MARK: kindred admin community

/// `kindred admin community create|update` (ROLE_ADMIN).
extension AdminCommand {
    struct Community: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create and change communities.", subcommands: [Create.self, Update.self])

        struct Settings: ParsableArguments {
            @Option(help: "mutual or one-way.") var mode: String?
            @Option(help: "Photos needed to be shown, 0..9.") var minPhotos: Int32?
            @Option(help: "Photos allowed, 1..9.") var maxPhotos: Int32?
            @Option(help: "Minimum age, 13..99.") var minAge: Int32?
            @Option(help: "Default search radius, km.") var defaultRadius: Int32?
            @Option(help: "Largest search radius, km.") var maxRadius: Int32?
            @Option(help: "Whether gender takes part in matching (true/false).") var genderMatching: Bool?

            func apply(to settings: inout Kindred.Common.V1.CommunitySettings) throws -> [String] {
                var paths: [String] = []
                if let mode {
                    switch mode {
                    case "mutual": settings.mode = .mutual
                    case "one-way": settings.mode = .oneWay
                    default: throw CLIError.usage("--mode is mutual or one-way")
                    }
                    paths.append("settings.mode")
                }
                if let minPhotos { settings.minPhotos = minPhotos; paths.append("settings.min_photos") }
                if let maxPhotos { settings.maxPhotos = maxPhotos; paths.append("settings.max_photos") }
                if let minAge { settings.minAgeYears = minAge; paths.append("settings.min_age_years") }
                if let defaultRadius { settings.defaultRadiusKm = defaultRadius; paths.append("settings.default_radius_km") }
                if let maxRadius { settings.maxRadiusKm = maxRadius; paths.append("settings.max_radius_km") }
                if let genderMatching { settings.genderMatching = genderMatching; paths.append("settings.gender_matching") }
                return paths
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create a community (other settings take their defaults).")
            @OptionGroup var global: GlobalOptions
            @Argument(help: "Id: 2..32 characters of [a-z0-9-].") var id: String
            @Option(help: "Name shown to people.") var name: String
            @OptionGroup var settings: Settings

            func run() async throws {
                try await Invocation.run(self.global) { invocation in
                    var settings = Kindred.Common.V1.CommunitySettings()
                    settings.signUpOpen = true
                    _ = try self.settings.apply(to: &settings)
                    let response = try await invocation.gateway.authenticated(
                        AdminAPI.createCommunity,
                        .with {
                            $0.communityId = self.id
                            $0.displayName = self.name
                            $0.settings = settings
                        })
                    CommunityCommand.render(response.community ?? .init()).forEach(Console.out)
                }
            }
        }

        struct Update: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Change a community's name or settings (only the options given).")
            @OptionGroup var global: GlobalOptions
            @Argument(help: "The community id.") var id: String
            @Option(help: "New name.") var name: String?
            @Option(help: "Apply only at this version.") var expectedVersion: Int64 = 0
            @OptionGroup var settings: Settings

            func run() async throws {
                try await Invocation.run(self.global) { invocation in
                    var settings = Kindred.Common.V1.CommunitySettings()
                    var paths = try self.settings.apply(to: &settings)
                    if self.name != nil { paths.append("display_name") }
                    guard !paths.isEmpty else { throw CLIError.usage("nothing to change: give --name or a setting") }
                    let response = try await invocation.gateway.authenticated(
                        AdminAPI.updateCommunity,
                        .with {
                            $0.communityId = self.id
                            $0.displayName = self.name ?? ""
                            $0.settings = settings
                            $0.updatePaths = paths
                            $0.expectedVersion = self.expectedVersion
                        })
                    CommunityCommand.render(response.community ?? .init()).forEach(Console.out)
                }
            }
        }
    }
}
