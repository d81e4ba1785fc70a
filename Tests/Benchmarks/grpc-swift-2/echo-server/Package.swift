// swift-tools-version:6.1
// grpc-swift-2's Echo for Tests/Benchmarks/grpc-h2load.sh --with-grpc-swift: a package of its own so that the
// Kindred package never depends on grpc-swift, and built only when that benchmark asks for it (never by CI).
import PackageDescription

let package = Package(
    name: "grpc-swift-2-echo",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/grpc/grpc-swift-2.git", exact: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", exact: "2.9.2"),
    ],
    targets: [
        .executableTarget(
            name: "grpc-swift-2-echo",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
            ]
        )
    ]
)
