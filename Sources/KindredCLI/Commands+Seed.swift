import ArgumentParser
import Foundation
import KindredGRPC
import KindredOpenSSL
import KindredPresets
import KindredProto
import KindredProtobuf

// `kindred admin seed`: a demo population through the gateway's public and admin APIs only — sign-up with the
// code from the development mail sink, profile, location, generated photos, swipes — repeatable from a seed.

private typealias Accounts = Kindred.Api.V1.AccountService.Method
private typealias Profiles = Kindred.Api.V1.ProfileService.Method
private typealias Decks = Kindred.Api.V1.DeckService.Method

extension AdminCommand {
    /// `kindred admin seed [--seed N] [--members N] [--mail-log PATH] [--json]`.
    struct Seed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create demo members (repeatable from a seed): accounts, profiles, photos, swipes, matches.",
            discussion: """
                Ensures the four preset communities (creating missing ones needs a signed-in admin; without a \
                session they must exist: run-cluster.sh installs them), then signs up --members members \
                (demo-SEED-N@example.com) spread over the communities and a few cities, each with a profile, \
                generated photos and a location near their city, and has them swipe on each other. Sign-up codes \
                are read from the development SMTP sink's log (--mail-log). Running it again with the same seed \
                finds the same members and completes whatever is missing: nobody is created twice. The \
                cluster's per-address limits must allow a few sign-ups a second (run-cluster.sh --demo lifts \
                them); rate-limited calls are retried after the time the gateway names.
                """
        )

        @OptionGroup var global: GlobalOptions
        @Option(help: "The seed number: the same seed gives the same members.") var seed: UInt64 = 1
        @Option(help: "How many members, 1..2000.") var members = 300
        @Option(
            help: ArgumentHelp(
                "The SMTP sink's log, where sign-up codes appear (default $KINDRED_CLUSTER_DIR/logs/smtp-sink.log, "
                    + "else .cluster/logs/smtp-sink.log).",
                valueName: "path"
            )
        )
        var mailLog: String?
        @Option(help: "Members set up at once, 1..16.") var concurrency = 4
        @Flag(help: "Print the result as JSON (members with their user ids).") var json = false

        func validate() throws {
            guard (1...2000).contains(self.members) else { throw ValidationError("--members must be 1..2000") }
            guard (1...16).contains(self.concurrency) else { throw ValidationError("--concurrency must be 1..16") }
        }

        func run() async throws {
            let environment = ProcessInfo.processInfo.environment
            let log =
                self.mailLog ?? environment["KINDRED_CLUSTER_DIR"].map { $0 + "/logs/smtp-sink.log" }
                ?? ".cluster/logs/smtp-sink.log"
            try await Invocation.run(self.global) { invocation in
                guard let transport = invocation.gateway.transport as? GRPCGatewayTransport else {
                    throw CLIError.usage("the seed needs the gRPC transport")
                }
                let started = ContinuousClock.now
                try await DemoSeeder.ensureCommunities(invocation, quiet: self.json)
                let population = DemoPopulation(seed: self.seed, count: self.members)
                let seeder = DemoSeeder(
                    client: transport.client,
                    population: population,
                    mail: MailCodes(path: log),
                    timeout: invocation.settings.timeout
                )
                let result = try await seeder.run(concurrency: self.concurrency, progress: !self.json)
                let seconds = (ContinuousClock.now - started).components.seconds
                if self.json {
                    Console.out(result.json(population))
                } else {
                    result.summary(population, seconds: seconds).forEach(Console.out)
                }
            }
        }
    }
}

/// Reads sign-up codes from the development SMTP sink's log, where each mail is one line
/// `mail mail-000001.eml to=ann@example.com subject="..." code=123456` (services/smtp-sink/smtp_sink.py).
actor MailCodes {
    private let path: String
    private var offset: UInt64 = 0
    private var pending = ""
    /// (recipient, code) in log order.
    private var lines: [(String, String)] = []

    init(path: String) { self.path = path }

    /// The position to wait from: codes logged before it are not the answer to a request made after it.
    func mark() throws -> Int {
        try self.scan()
        return self.lines.count
    }

    /// The first code for `address` logged at or after `mark`, waiting up to `timeout`.
    func code(for address: String, after mark: Int, timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            try self.scan()
            if let found = self.lines[mark...].first(where: { $0.0 == address }) { return found.1 }
            guard ContinuousClock.now < deadline else {
                throw CLIError.input("no sign-up code for \(address) appeared in \(self.path) (is it the sink's log?)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    private func scan() throws {
        guard let handle = FileHandle(forReadingAtPath: self.path) else {
            throw CLIError.usage("cannot read the mail sink's log \(self.path) (--mail-log)")
        }
        defer { try? handle.close() }
        try handle.seek(toOffset: self.offset)
        let data = handle.readDataToEndOfFile()
        self.offset += UInt64(data.count)
        self.pending += String(decoding: data, as: UTF8.self)
        while let newline = self.pending.firstIndex(of: "\n") {
            let line = self.pending[..<newline]
            self.pending = String(self.pending[self.pending.index(after: newline)...])
            if let entry = Self.parse(line) { self.lines.append(entry) }
        }
    }

    /// (recipient, code) of one log line, nil for lines without both.
    static func parse(_ line: Substring) -> (String, String)? {
        let words = line.split(separator: " ")
        guard words.first == "mail",
            let to = words.first(where: { $0.hasPrefix("to=") }),
            let code = words.last, code.hasPrefix("code=")
        else { return nil }
        return (String(to.dropFirst(3)), String(code.dropFirst(5)))
    }
}

/// Creates (or finds) the members of a `DemoPopulation` through the gateway, then their swipes.
struct DemoSeeder: Sendable {
    let client: GRPCClient
    let population: DemoPopulation
    let mail: MailCodes
    let timeout: Duration

    /// What became of one member.
    struct Seeded: Sendable {
        var userId: String
        var accessToken: String
        var createdAccount: Bool
        var createdProfile: Bool
        var photosAdded: Int
    }

    struct Result: Sendable {
        var members: [Int: Seeded] = [:]
        var swipes = 0
        var replayed = 0
        var matches = 0
        var connections = 0

        func summary(_ population: DemoPopulation, seconds: Int64) -> [String] {
            let created = self.members.values.filter(\.createdAccount).count
            let photos = self.members.values.map(\.photosAdded).reduce(0, +)
            let seed = population.seed, count = self.members.count
            var lines = [
                "Seeded \(count) demo members (seed \(seed)) in \(seconds) s: \(created) new accounts, "
                    + "\(count - created) already there; \(photos) photos added; \(self.swipes) swipes "
                    + "(\(self.replayed) already made), \(self.matches) new matches, "
                    + "\(self.connections) new connections."
            ]
            if let first = population.members.first {
                lines += [
                    "Sign in as one of them (password \(population.password)):",
                    "  export KINDRED_COMMUNITY=\(first.community)",
                    "  echo '\(population.password)' | kindred signin \(first.email)",
                    "  kindred deck; kindred picks; kindred matches; kindred likes",
                    "Members are demo-\(seed)-0@example.com ... demo-\(seed)-\(population.members.count - 1)"
                        + "@example.com (N % 4: 0 dating, 1 bizmatch, 2 playdates, 3 fitness).",
                ]
            }
            return lines
        }

        struct MemberJSON: Encodable {
            var index: Int
            var email, community, userId, city: String
        }

        struct ResultJSON: Encodable {
            var seed: UInt64
            var password: String
            var createdAccounts, swipes, replayedSwipes, matches, connections: Int
            var members: [MemberJSON]
        }

        func json(_ population: DemoPopulation) -> String {
            Render.encode(
                ResultJSON(
                    seed: population.seed,
                    password: population.password,
                    createdAccounts: self.members.values.filter(\.createdAccount).count,
                    swipes: self.swipes,
                    replayedSwipes: self.replayed,
                    matches: self.matches,
                    connections: self.connections,
                    members: population.members.map {
                        MemberJSON(
                            index: $0.index,
                            email: $0.email,
                            community: $0.community,
                            userId: self.members[$0.index]?.userId ?? "",
                            city: $0.city.name
                        )
                    }
                )
            )
        }
    }

    /// Every preset community exists afterwards: missing ones are created with the signed-in admin's session.
    static func ensureCommunities(_ invocation: Invocation, quiet: Bool) async throws {
        for preset in CommunityPresets.all {
            do {
                _ = try await invocation.gateway.call(
                    Profiles.getCommunity,
                    .with { $0.communityId = preset.communityId }
                )
                continue
            } catch let error as RPCError where error.code == .notFound {}
            guard (try? invocation.gateway.storedSession()) != nil else {
                throw CLIError.usage(
                    "community \(preset.communityId) does not exist: sign in as an admin to let the seed create it, "
                        + "or run `profile-server communities install`"
                )
            }
            do {
                _ = try await invocation.gateway.authenticated(
                    AdminAPI.createCommunity,
                    .with {
                        $0.communityId = preset.communityId
                        $0.displayName = preset.displayName
                        $0.settings = preset.settings ?? .init()
                    }
                )
                if !quiet { Console.out("Created community \(preset.communityId).") }
            } catch let error as RPCError where error.code == .alreadyExists {}
        }
    }

    func run(concurrency: Int, progress: Bool) async throws -> Result {
        var result = Result()
        try await withThrowingTaskGroup(of: (Int, Seeded).self) { group in
            var next = 0
            for member in self.population.members {
                if next >= concurrency, let (index, seeded) = try await group.next() {
                    result.members[index] = seeded
                    if progress, result.members.count % 50 == 0 {
                        Console.error("\(result.members.count)/\(self.population.members.count) members ready")
                    }
                }
                group.addTask { (member.index, try await self.seed(member)) }
                next += 1
            }
            for try await (index, seeded) in group { result.members[index] = seeded }
        }
        let swipes = self.population.swipes
        try await withThrowingTaskGroup(of: Kindred.Api.V1.SwipeResponse.self) { group in
            var running = 0
            func record(_ response: Kindred.Api.V1.SwipeResponse) {
                result.swipes += 1
                if response.replayed {
                    result.replayed += 1
                } else if response.outcome == .matched {
                    result.matches += 1
                } else if response.outcome == .connected {
                    result.connections += 1
                }
            }
            for swipe in swipes {
                if running >= concurrency * 2, let response = try await group.next() {
                    record(response)
                    running -= 1
                }
                guard let from = result.members[swipe.from], let to = result.members[swipe.to] else { continue }
                group.addTask { try await self.swipe(from, to.userId, like: swipe.like) }
                running += 1
            }
            for try await response in group { record(response) }
        }
        return result
    }

    // MARK: One member

    func seed(_ member: DemoPopulation.Member) async throws -> Seeded {
        let (token, created) = try await self.account(member)
        let auth: Metadata = ["authorization": .string("Bearer \(token.accessToken)")]
        var createdProfile = false
        var profile: Kindred.Api.V1.MyProfile
        do {
            profile = try await self.call(Profiles.getMyProfile, .init(), auth).profile ?? .init()
        } catch let error as RPCError where error.code == .notFound {
            profile =
                try await self.call(
                    Profiles.createProfile,
                    .with {
                        $0.fields = member.fields
                        $0.idempotencyKey = "demo-\(self.population.seed)-\(member.index)"
                    },
                    auth
                ).profile ?? .init()
            createdProfile = true
        }
        if !profile.locationSet {
            _ = try await self.call(
                Profiles.updateLocation,
                .with {
                    $0.location = .with {
                        $0.latitudeDeg = member.latitude
                        $0.longitudeDeg = member.longitude
                    }
                },
                auth
            )
        }
        var added = 0
        for (number, photoSeed) in member.photoSeeds.enumerated() where number >= profile.photos.count {
            _ = try await self.retrying {
                try await PhotoUpload.upload(
                    self.client,
                    metadata: auth,
                    bytes: DemoPortrait.png(seed: photoSeed),
                    contentType: "image/png",
                    idempotencyKey: "demo-\(self.population.seed)-\(member.index)-photo-\(number)"
                )
            }
            added += 1
        }
        return Seeded(
            userId: token.userId,
            accessToken: token.accessToken,
            createdAccount: created,
            createdProfile: createdProfile,
            photosAdded: added
        )
    }

    /// Signs the member in; signs them up first (code from the sink) when the account does not exist yet, and
    /// finishes a sign-up an earlier run left unverified.
    func account(_ member: DemoPopulation.Member) async throws -> (
        token: (userId: String, accessToken: String), created: Bool
    ) {
        let signIn = Kindred.Api.V1.SignInRequest.with {
            $0.communityId = member.community
            $0.login = member.email
            $0.password = self.population.password
            $0.client = .with {
                $0.deviceName = "kindred admin seed"
                $0.userAgent = "kindred-cli"
            }
        }
        var created = false
        do {
            let response = try await self.call(Accounts.signIn, signIn)
            return ((response.account?.userId ?? "", response.tokens?.accessToken ?? ""), false)
        } catch let error as RPCError where error.code == .unauthenticated && error.reason == "INVALID_CREDENTIALS" {
            let mark = try await self.mail.mark()
            _ = try await self.call(
                Accounts.signUp,
                .with {
                    $0.communityId = member.community
                    $0.email = member.email
                    $0.username = member.username
                    $0.password = self.population.password
                }
            )
            try await self.verify(member, after: mark)
            created = true
        } catch let error as RPCError where error.reason == "EMAIL_NOT_VERIFIED" {
            let mark = try await self.mail.mark()
            _ = try await self.call(
                Accounts.resendVerification,
                .with {
                    $0.communityId = member.community
                    $0.email = member.email
                }
            )
            try await self.verify(member, after: mark)
            created = true
        }
        let response = try await self.call(Accounts.signIn, signIn)
        return ((response.account?.userId ?? "", response.tokens?.accessToken ?? ""), created)
    }

    private func verify(_ member: DemoPopulation.Member, after mark: Int) async throws {
        let code = try await self.mail.code(for: member.email, after: mark)
        _ = try await self.call(
            Accounts.verifyEmail,
            .with {
                $0.proof = .code(
                    .with {
                        $0.communityId = member.community
                        $0.email = member.email
                        $0.code = code
                    }
                )
            }
        )
    }

    /// A swipe, retried while the members' profiles are still on their way to the match service (events).
    func swipe(_ from: Seeded, _ target: String, like: Bool) async throws -> Kindred.Api.V1.SwipeResponse {
        let auth: Metadata = ["authorization": .string("Bearer \(from.accessToken)")]
        let request = Kindred.Api.V1.SwipeRequest.with {
            $0.targetUserId = target
            $0.action = like ? .like : .pass
            $0.surface = "deck"
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try await self.call(Decks.swipe, request, auth)
            } catch let error as RPCError
                where (error.code == .notFound || error.reason == "PROFILE_INCOMPLETE")
                && ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    // MARK: Calls

    private func call<Request: ProtoMessage, Response: ProtoMessage>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        _ metadata: Metadata = [:]
    ) async throws -> Response {
        try await self.retrying { try await self.client.unary(method, request, metadata: metadata) }
    }

    /// Retries while the gateway limits the rate (after the time it names) or a service is briefly unavailable.
    private func retrying<T>(_ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as RPCError
                where (error.code == .resourceExhausted || error.code == .unavailable) && attempt < 60
            {
                attempt += 1
                let named = error.errorDetail?.retryAfterMs ?? 0
                try await Task.sleep(for: .milliseconds(max(100, min(named, 5000))))
            }
        }
    }
}

/// One photo upload (UploadPhoto's header, then the bytes in chunks of 1 MiB), shared by `kindred photo add` and
/// the seed.
enum PhotoUpload {
    static func upload(
        _ client: GRPCClient,
        metadata: Metadata,
        bytes: [UInt8],
        contentType: String,
        idempotencyKey: String
    ) async throws -> Kindred.Api.V1.UploadPhotoResponse {
        try await client.clientStreaming(
            Profiles.uploadPhoto,
            metadata: metadata,
            options: CallOptions(timeout: .seconds(60))
        ) {
            writer in
            try await writer.write(
                .with {
                    $0.part = .header(
                        .with {
                            $0.contentType = contentType
                            $0.totalSizeBytes = Int64(bytes.count)
                            $0.sha256 = SHA256.hash(bytes)
                            $0.position = Int32.max
                            $0.idempotencyKey = idempotencyKey
                        }
                    )
                }
            )
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + (1 << 20))
                try await writer.write(.with { $0.part = .chunk(Array(bytes[offset..<end])) })
                offset = end
            }
        }
    }
}
