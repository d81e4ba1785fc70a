// swift-tools-version:6.1
import PackageDescription

/// Every C library is a system-library target imported by exactly one Swift wrapper module.
func systemLibrary(_ name: String, pkgConfig: String, apt: [String]) -> Target {
    .systemLibrary(name: name, pkgConfig: pkgConfig, providers: [.apt(apt)])
}

let nio: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
]
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
/// swift-metrics (the API every counter is recorded through) and swift-prometheus (the default backend).
let metrics: Target.Dependency = .product(name: "CoreMetrics", package: "swift-metrics")
let prometheus: Target.Dependency = .product(name: "Prometheus", package: "swift-prometheus")
/// swift-distributed-tracing: the API every span is made through (a no-op tracer unless a server installs OTel).
let tracing: Target.Dependency = .product(name: "Tracing", package: "swift-distributed-tracing")

/// The per-request path (HTTP/2 session, gRPC runtime): release builds skip dynamic exclusivity checks there.
/// Those modules keep state confined to one event loop and never hold an access across a call that could
/// re-enter (see HTTP2Session); debug builds and tests keep the checks on and would catch a violation.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "Kindred",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "kindred-interop-server", targets: ["kindred-interop-server"]),
        .executable(name: "kindred-grpc-yardstick", targets: ["kindred-grpc-yardstick"]),
        .executable(name: "kindred-grpc-client-bench", targets: ["kindred-grpc-client-bench"]),
        .executable(name: "auth-server", targets: ["auth-server"]),
        .executable(name: "gateway-server", targets: ["gateway-server"]),
        .executable(name: "profile-server", targets: ["profile-server"]),
        .executable(name: "kindred", targets: ["kindred"]),
        .executable(name: "chat-server", targets: ["chat-server"]),
        .executable(name: "kindred-chat-bench", targets: ["kindred-chat-bench"]),
        .executable(name: "kindred-push-bench", targets: ["kindred-push-bench"]),
        .executable(name: "match-server", targets: ["match-server"]),
        .executable(name: "notify-server", targets: ["notify-server"]),
        .executable(name: "discovery-server", targets: ["discovery-server"]),
        .executable(name: "kindred-discovery-quality", targets: ["kindred-discovery-quality"]),
        .executable(name: "kindred-discovery-bench", targets: ["kindred-discovery-bench"]),
        .executable(name: "kindred-discovery-pg-bench", targets: ["kindred-discovery-pg-bench"]),
        .library(name: "KindredGRPC", targets: ["KindredGRPC"]),
        // For the fuzz targets (Tests/Fuzz, a package of its own that depends on this one by path).
        .library(name: "KindredProtobuf", targets: ["KindredProtobuf"]),
        .library(name: "KindredProto", targets: ["KindredProto"]),
        .library(name: "KindredProtoJSON", targets: ["KindredProtoJSON"]),
        .library(name: "KindredServiceKit", targets: ["KindredServiceKit"]),
        .library(name: "KindredGeo", targets: ["KindredGeo"]),
        .library(name: "KindredMediaURL", targets: ["KindredMediaURL"]),
        .library(name: "KindredIdentity", targets: ["KindredIdentity"]),
        .library(name: "KindredSMTP", targets: ["KindredSMTP"]),
        .library(name: "KindredNATS", targets: ["KindredNATS"]),
        .library(name: "KindredVips", targets: ["KindredVips"]),
        .library(name: "KindredHTTP2", targets: ["KindredHTTP2"]),
        .library(name: "KindredOpenSSL", targets: ["KindredOpenSSL"]),
        .library(name: "KindredGRPCServices", targets: ["KindredGRPCServices"]),
        .executable(name: "kindred-photo-bench", targets: ["kindred-photo-bench"]),
        .executable(name: "kindred-postgres-bench", targets: ["kindred-postgres-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // OTLP over HTTP only: the gRPC exporter would pull in a second gRPC stack (grpc-swift-2) to build.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // C libraries.
        systemLibrary("CNghttp2", pkgConfig: "libnghttp2", apt: ["libnghttp2-dev"]),
        systemLibrary("CProtobufC", pkgConfig: "libprotobuf-c", apt: ["libprotobuf-c-dev"]),
        systemLibrary("COpenSSL", pkgConfig: "openssl", apt: ["libssl-dev"]),
        systemLibrary("CLibpq", pkgConfig: "libpq", apt: ["libpq-dev"]),
        systemLibrary("CArgon2", pkgConfig: "libargon2", apt: ["libargon2-dev"]),
        systemLibrary("CVips", pkgConfig: "vips", apt: ["libvips-dev"]),
        // glibc's allocator (malloc.h): its statistics and settings, for the servers' memory (ProcessMemory).
        .systemLibrary(name: "CMalloc"),

        // Wrappers: the one Swift module per C library.
        .target(name: "KindredHTTP2", dependencies: ["CNghttp2"] + nio, swiftSettings: hotPath),
        .target(name: "KindredProtobuf", dependencies: ["CProtobufC"]),
        .target(name: "KindredOpenSSL", dependencies: ["COpenSSL"] + nio),
        .target(name: "KindredArgon2", dependencies: ["CArgon2"]),
        // The photo pipeline: untrusted uploads checked, decoded and re-encoded into clean renditions (libvips).
        .target(name: "KindredVips", dependencies: ["CVips"]),
        // Measures the pipeline (Tests/Benchmarks/photo-pipeline.sh; the leak and bomb tests).
        .executableTarget(
            name: "kindred-photo-bench",
            dependencies: ["KindredVips", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .target(name: "KindredPostgres", dependencies: ["CLibpq", "KindredTracing", logging, tracing] + nio),
        // Measures what a statement costs the client (Tests/Benchmarks/postgres-client.sh, beside pgbench).
        .executableTarget(name: "kindred-postgres-bench", dependencies: ["KindredPostgres", logging]),
        // Whether this process makes spans, and W3C trace context in and out (swift-distributed-tracing API only).
        .target(name: "KindredTracing", dependencies: [tracing]),
        // The servers' OTLP export (swift-otel): installs the tracer when an endpoint is configured. Only the server
        // executables link it (ServerCommand.runWithTracing), not the kit's users (tests, tools, fuzz targets).
        .target(
            name: "KindredOTel",
            dependencies: [
                "KindredServiceKit", "KindredTracing", logging, tracing, .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // A NATS client with the JetStream calls the event bus needs (streams, durable pull consumers, acks).
        .target(name: "KindredNATS", dependencies: [logging] + nio),
        // Sends mail to an SMTP relay (STARTTLS through KindredOpenSSL).
        .target(name: "KindredSMTP", dependencies: ["KindredOpenSSL", logging] + nio),
        /// Push providers (APNs, FCM, Web Push): each speaks its protocol and reports a `PushOutcome`.
        .target(name: "KindredPush", dependencies: ["KindredGRPC", "KindredHTTP2", "KindredOpenSSL", logging] + nio),
        // Starts a private PostgreSQL (initdb into a temporary folder) for tests.
        .target(name: "KindredPostgresTesting", dependencies: ["KindredPostgres", "KindredTestSupport", logging]),
        // Tests: blocking work (subprocesses, seconds of CPU) off the cooperative pool, for every test target.
        .target(name: "KindredTestSupport"),
        // Texts per language chosen by a member's locale (notify's notifications, auth's mails); no dependencies.
        .target(name: "KindredLocalization"),

        // Generated code: protobuf-c C files (CKindredProto) and Swift value types (KindredProto).
        .target(
            name: "CKindredProto",
            dependencies: ["CProtobufC"],
            cSettings: [.headerSearchPath("generated")]
        ),
        .target(name: "KindredProto", dependencies: ["KindredProtobuf", "CKindredProto"]),
        // The proto3 JSON mapping for every generated message, driven by the embedded descriptors (Connect JSON).
        .target(name: "KindredProtoJSON", dependencies: ["KindredProtobuf", "KindredProto"]),
        // Measures the mapping on a deck page next to the binary path (Tests/Benchmarks/protojson-bench.sh).
        .executableTarget(name: "kindred-protojson-bench", dependencies: ["KindredProtoJSON", "KindredProto"]),

        // The gRPC runtime and the standard services every server carries.
        .target(
            name: "KindredGRPC",
            dependencies: [
                "KindredHTTP2", "KindredProtobuf", "KindredOpenSSL", "KindredTracing", logging, metrics, prometheus,
                tracing, .product(name: "NIOHTTP1", package: "swift-nio"),
            ] + nio,
            swiftSettings: hotPath
        ),
        // Health, reflection and what every server shares: runner, admin (metrics) port, logging, configuration.
        .target(
            name: "KindredGRPCServices",
            dependencies: [
                "CMalloc", "KindredGRPC", "KindredProto", "KindredOpenSSL", logging, metrics,
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ] + nio
        ),

        // Geohash cells: encoding, bounds, centres and distances (the location policy and discovery).
        .target(name: "KindredGeo"),
        // Signed, expiring media and upload URLs: profile signs them, the gateway's media port checks them.
        .target(name: "KindredMediaURL", dependencies: ["KindredOpenSSL"]),

        // Access tokens: Ed25519 JWT signing and the verification every service uses; OIDC ID tokens.
        .target(name: "KindredIdentity", dependencies: ["KindredOpenSSL", "KindredGRPC", "KindredProto", logging]),

        // The service kit: what every service shares beyond the runtime — the generic server command, database
        // settings and migrations, error mapping, events (outbox, relay, inbox), service identity, page tokens.
        // A module of its own, not part of KindredGRPCServices, because the kindred CLI depends on
        // KindredGRPCServices and must not pull in libpq.
        .target(
            name: "KindredServiceKit",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredPostgres", "KindredIdentity", "KindredProto",
                "KindredProtobuf", "KindredOpenSSL", "KindredTracing", "KindredGeo", "KindredNATS", logging, metrics, tracing,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + nio
        ),
        // Tests: a real server of any service on a private, freshly migrated database.
        .target(
            name: "KindredServiceTesting",
            dependencies: [
                "KindredServiceKit", "KindredGRPC", "KindredGRPCServices", "KindredPostgresTesting", "KindredIdentity",
                "KindredOpenSSL", "KindredProto", "KindredProtobuf", logging,
            ]
        ),

        // The auth service: accounts, sessions, tokens (library) and its thin executable.
        .target(
            name: "KindredAuth",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredPostgres",
                "KindredArgon2", "KindredOpenSSL", "KindredIdentity", "KindredSMTP", "KindredLocalization", logging,
                metrics,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + nio,
            resources: [.copy("Resources")]
        ),
        .executableTarget(name: "auth-server", dependencies: ["KindredOTel", "KindredAuth", "KindredServiceKit"]),

        // The chat service: threads, messages, receipts, live event streams (library) and its thin executable.
        .target(
            name: "KindredChat",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredProtobuf",
                "KindredPostgres", "KindredOpenSSL", "KindredIdentity", logging, metrics,
            ] + nio
        ),
        .executableTarget(name: "chat-server", dependencies: ["KindredOTel", "KindredChat", "KindredServiceKit"]),
        // The chat load driver (Tests/Benchmarks/chat-bench.sh).
        .executableTarget(
            name: "kindred-chat-bench",
            dependencies: [
                "KindredAuth", "KindredGRPC", "KindredIdentity", "KindredProto", "KindredServiceKit", logging,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + nio
        ),
        // The APNs provider's load driver (Tests/Benchmarks/push-apns.sh).
        .executableTarget(
            name: "kindred-push-bench",
            dependencies: [
                "KindredPush", logging, .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + nio
        ),
        // The four preset communities (profile installs them; the CLI's demo seed ensures them): proto values only.
        .target(name: "KindredPresets", dependencies: ["KindredProto", "KindredLocalization"]),
        // The profile service: communities, profiles, location, photos (library) and its thin executable.
        .target(
            name: "KindredProfile",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredPostgres",
                "KindredOpenSSL", "KindredIdentity", "KindredVips", "KindredPresets", "KindredGeo", "KindredMediaURL",
                logging, metrics,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + nio
        ),
        .executableTarget(name: "profile-server", dependencies: ["KindredOTel", "KindredProfile", "KindredServiceKit"]),

        // The gateway: the public API (kindred.api.v1), authentication, limits, fan-out (library) and its executable.
        .target(
            name: "KindredGateway",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredProtobuf",
                "KindredProtoJSON", "KindredIdentity", "KindredOpenSSL", "KindredMediaURL", logging, metrics,
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ] + nio
        ),
        .executableTarget(name: "gateway-server", dependencies: ["KindredOTel", "KindredGateway", "KindredServiceKit"]),

        // The match service: swipes, pair state, matches and follows, blocks and reports (library) and its executable.
        .target(
            name: "KindredMatch",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredPostgres",
                "KindredIdentity", "KindredOpenSSL", "KindredTracing", logging, metrics, tracing,
            ] + nio
        ),
        .executableTarget(name: "match-server", dependencies: ["KindredOTel", "KindredMatch", "KindredServiceKit"]),
        // The notify service: devices, notification settings and pushes (library) and its executable.
        .target(
            name: "KindredNotify",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredPostgres",
                "KindredIdentity", "KindredOpenSSL", "KindredPush", "KindredHTTP2", "KindredLocalization", "KindredPresets",
                logging, metrics,
            ] + nio
        ),
        .executableTarget(name: "notify-server", dependencies: ["KindredOTel", "KindredNotify", "KindredServiceKit"]),
        // The swipe benchmark's load driver (Tests/Benchmarks/match-swipes.sh).
        .executableTarget(
            name: "kindred-load",
            dependencies: [
                "KindredGRPC", "KindredIdentity", "KindredOpenSSL", "KindredProto", "KindredServiceKit", logging,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // The `kindred` command-line client (library + thin executable).
        .target(
            name: "KindredCLI",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredProto", "KindredProtobuf", "KindredOpenSSL", logging,
                "KindredPresets",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ] + nio
        ),
        .executableTarget(name: "kindred", dependencies: ["KindredCLI"]),

        // The discovery service: candidate index and recommender (library).
        .target(
            name: "KindredDiscovery",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredServiceKit", "KindredProto", "KindredProtobuf",
                "KindredPostgres", "KindredOpenSSL", "KindredIdentity", "KindredGeo", logging, metrics,
            ] + nio
        ),
        .executableTarget(name: "discovery-server", dependencies: ["KindredOTel", "KindredDiscovery", "KindredServiceKit"]),
        // Offline quality of the recommender on generated populations (issue 12) and its command.
        .target(name: "KindredDiscoveryQuality", dependencies: ["KindredDiscovery"]),
        .executableTarget(name: "kindred-discovery-quality", dependencies: ["KindredDiscoveryQuality"]),
        // Deck speed of the in-memory index at millions of members (issue 12).
        .executableTarget(name: "kindred-discovery-bench", dependencies: ["KindredDiscovery", "KindredGeo", "KindredProto"]),
        .executableTarget(
            name: "kindred-discovery-pg-bench",
            dependencies: [
                "KindredDiscovery", "KindredPostgres", "KindredPostgresTesting", "KindredProto", "KindredServiceKit",
                "KindredGeo", logging,
            ]),

        // The interop test service (used by tests, the benchmark and Python grpcio).
        .target(name: "KindredInterop", dependencies: ["KindredGRPC", "KindredGRPCServices", "KindredProto", logging]),
        .executableTarget(
            name: "kindred-interop-server",
            dependencies: ["KindredInterop", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // The bare SwiftNIO + nghttp2 + protobuf-c Echo the runtime is measured against (Tests/Benchmarks/grpc-h2load.sh).
        .executableTarget(name: "kindred-grpc-yardstick", dependencies: ["CNghttp2", "KindredProto"] + nio, swiftSettings: hotPath),
        // GRPCClient making Echo calls: the client side of the runtime's per-call cost (Tests/Benchmarks/grpc-callgrind.sh).
        .executableTarget(name: "kindred-grpc-client-bench", dependencies: ["KindredGRPC", "KindredProto", logging]),

        .testTarget(
            name: "KindredProtobufTests", dependencies: ["KindredProtobuf", "KindredProto", "KindredTestSupport"],
            exclude: ["python"]),
        .testTarget(
            name: "KindredProtoJSONTests", dependencies: ["KindredProtoJSON", "KindredProto", "KindredProtobuf", "KindredTestSupport"],
            exclude: ["python"]),
        .testTarget(name: "KindredHTTP2Tests", dependencies: ["KindredHTTP2"]),
        .testTarget(name: "KindredOpenSSLTests", dependencies: ["KindredOpenSSL"] + nio),
        .testTarget(name: "KindredArgon2Tests", dependencies: ["KindredArgon2"]),
        .testTarget(name: "KindredVipsTests", dependencies: ["KindredVips", "KindredTestSupport"], exclude: ["python"]),
        .testTarget(
            name: "KindredIdentityTests",
            dependencies: ["KindredIdentity", "KindredOpenSSL", "KindredGRPC", "KindredTestSupport", logging],
            exclude: ["python"]
        ),
        .testTarget(
            name: "KindredAuthTests",
            dependencies: [
                "KindredAuth", "KindredPostgresTesting", "KindredGRPC", "KindredGRPCServices", "KindredProto",
                "KindredIdentity", "KindredServiceKit", "KindredServiceTesting", "KindredTestSupport", "KindredLocalization",
            ] + nio,
            exclude: ["python"]
        ),
        .testTarget(
            name: "KindredNATSTests", dependencies: ["KindredNATS", "KindredTestSupport", logging] + nio),
        .testTarget(
            name: "KindredSMTPTests",
            dependencies: ["KindredSMTP", "KindredOpenSSL", logging] + nio,
            exclude: ["python"]
        ),
        .testTarget(
            name: "KindredGatewayTests",
            dependencies: [
                "KindredGateway", "KindredAuth", "KindredPostgresTesting", "KindredGRPC", "KindredGRPCServices",
                "KindredProto", "KindredProtobuf", "KindredIdentity",
            ] + nio
        ),
        .testTarget(
            name: "KindredChatTests",
            dependencies: [
                "KindredChat", "KindredAuth", "KindredServiceTesting", "KindredPostgresTesting", "KindredGRPC",
                "KindredGRPCServices", "KindredProto", "KindredIdentity", "KindredServiceKit", "KindredArgon2",
            ] + nio
        ),
        .testTarget(
            name: "KindredMatchTests",
            dependencies: [
                "KindredMatch", "KindredServiceKit", "KindredServiceTesting", "KindredPostgresTesting", "KindredPostgres",
                "KindredGRPC", "KindredGRPCServices", "KindredProto", "KindredProtobuf", "KindredIdentity", "KindredOpenSSL", logging,
            ] + nio
        ),
        .testTarget(
            name: "KindredNotifyTests",
            dependencies: [
                "KindredNotify", "KindredServiceKit", "KindredServiceTesting", "KindredPostgresTesting", "KindredPostgres",
                "KindredGRPC", "KindredGRPCServices", "KindredProto", "KindredIdentity", "KindredPresets", "KindredPush",
                "KindredTestSupport", logging, metrics,
            ] + nio
        ),
        .testTarget(
            name: "KindredProfileTests",
            dependencies: [
                "KindredProfile", "KindredAuth", "KindredServiceKit", "KindredServiceTesting", "KindredPostgresTesting",
                "KindredGRPC", "KindredGRPCServices", "KindredProto", "KindredIdentity", "KindredOpenSSL", "KindredGeo",
                "KindredMediaURL", logging,
            ] + nio,
            exclude: ["python"]
        ),
        .testTarget(name: "KindredCLITests", dependencies: ["KindredCLI", "KindredProto", "KindredGRPC", "KindredProtobuf"]),
        .testTarget(
            name: "KindredDiscoveryTests",
            dependencies: [
                "KindredDiscovery", "KindredDiscoveryQuality", "KindredServiceTesting", "KindredPostgresTesting",
                "KindredServiceKit", "KindredGRPC", "KindredGRPCServices", "KindredIdentity", "KindredOpenSSL",
                "KindredProto", "KindredProtobuf", "KindredPostgres", "KindredGeo", logging,
            ]),
        .testTarget(name: "KindredPostgresTests", dependencies: ["KindredPostgres", "KindredPostgresTesting"] + nio),
        .testTarget(
            name: "KindredServiceKitTests",
            dependencies: [
                "KindredServiceKit", "KindredServiceTesting", "KindredGRPCServices", "KindredGRPC", "KindredProto",
                "KindredInterop", "KindredPostgresTesting", "KindredPostgres", "KindredIdentity", "KindredOpenSSL",
                "KindredGeo", "KindredNATS", "KindredTestSupport", logging, metrics, prometheus,
            ] + nio
        ),
        .testTarget(
            name: "KindredGRPCTests",
            dependencies: [
                "KindredGRPC", "KindredGRPCServices", "KindredInterop", "KindredProto", "KindredOpenSSL", metrics,
                "KindredTestSupport", prometheus, .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + nio
        ),
        .testTarget(
            name: "KindredPushTests",
            dependencies: ["KindredPush", "KindredGRPC", "KindredHTTP2", "KindredOpenSSL", "KindredTestSupport", logging] + nio
        ),
    ]
)
