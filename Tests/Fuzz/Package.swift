// swift-tools-version:6.0
import PackageDescription

/// libFuzzer targets over every decoder of outside bytes (README.md). A package of its own so that the normal
/// `swift build` of Kindred never sees `-sanitize=fuzzer`: build with
/// `swift build --package-path Tests/Fuzz --sanitize=fuzzer --sanitize=address` (campaign.sh does).
/// Debug builds: the targets reach internal decoders through `@testable import`.
let package = Package(
    name: "KindredFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Kindred", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        .target(name: "CFuzzDriver"),
        .target(name: "FuzzSupport", dependencies: ["CFuzzDriver"]),
        fuzzTarget("FuzzProtobuf", kindred: ["KindredProtobuf", "KindredProto"]),
        fuzzTarget("FuzzGRPCFraming", kindred: ["KindredGRPC"], nio: true),
        fuzzTarget("FuzzProtoJSON", kindred: ["KindredProtoJSON", "KindredProtobuf", "KindredProto"]),
        fuzzTarget("FuzzPageTokenMediaURL", kindred: ["KindredServiceKit", "KindredMediaURL", "KindredOpenSSL"]),
        fuzzTarget("FuzzTextGeohash", kindred: ["KindredServiceKit", "KindredGeo"]),
        fuzzTarget("FuzzJWT", kindred: ["KindredIdentity", "KindredOpenSSL"]),
        fuzzTarget("FuzzSMTPReply", kindred: ["KindredSMTP"], nio: true),
        fuzzTarget("FuzzPhotoContainer", kindred: ["KindredVips"]),
        fuzzTarget("FuzzHTTP2Server", kindred: ["KindredHTTP2"], nio: true),
        fuzzTarget("FuzzNATS", kindred: ["KindredNATS"]),
        fuzzTarget(
            "FuzzHTTP1", kindred: ["KindredGRPCServices", "KindredGRPC", "KindredHTTP2"], nio: true,
            more: [
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]),
    ]
)

/// One libFuzzer target: `LLVMFuzzerTestOneInput` in its main.swift, libFuzzer's own `main` at link time.
func fuzzTarget(_ name: String, kindred: [String], nio: Bool = false, more: [Target.Dependency] = []) -> Target {
    let nioCore: [Target.Dependency] = nio ? [.product(name: "NIOCore", package: "swift-nio")] : []
    return .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + kindred.map { .product(name: $0, package: "Kindred") } + nioCore + more
    )
}
