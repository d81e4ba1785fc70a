import ArgumentParser
import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredInterop
import KindredOpenSSL
import Logging

/// The interop test server: serves `kindred.testing.v1.InteropService` with health and reflection.
/// Prints `LISTENING host:port` on stdout once it accepts connections.
@main
struct InteropServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kindred-interop-server",
        abstract: "Serve the Kindred interop test service (for tests and benchmarks)."
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 50099
    @Option(help: "PEM certificate chain; enables TLS with ALPN h2.") var tlsCert: String?
    @Option(help: "PEM private key for --tls-cert.") var tlsKey: String?
    @Option(help: "PEM CA bundle; requires client certificates (mTLS).") var clientCa: String?
    @Option(help: "Log level (trace, debug, info, notice, warning, error).") var logLevel = "warning"
    @Option(help: "Seconds for the preface and first SETTINGS (0: none; default: the runtime's).") var handshakeTimeout: Double?
    @Option(help: "Seconds a connection may wait before its first request (0: none).") var firstRequestTimeout: Double?
    @Option(help: "Seconds for a unary request body or one streamed message (0: none).") var requestBodyTimeout: Double?
    @Option(help: "Seconds a connection may stay unable to write (0: none).") var writeStallTimeout: Double?
    @Option(help: "First abuse penalty in seconds for the address (default 0: no penalty by address).") var abusePenalty: Double?
    @Option(help: "Connections from penalised addresses held until the penalty ends (0: refuse them at once).") var abuseTarpit: Int?

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = Logger.Level(rawValue: self.logLevel) ?? .warning
            return handler
        }
        let logger = Logger(label: "kindred.interop")
        var configuration = GRPCServerConfiguration()
        configuration.host = self.host
        configuration.port = self.port
        func duration(_ seconds: Double) -> Duration? { seconds > 0 ? .milliseconds(Int64(seconds * 1000)) : nil }
        if let handshakeTimeout { configuration.handshakeTimeout = duration(handshakeTimeout) }
        if let firstRequestTimeout { configuration.firstRequestTimeout = duration(firstRequestTimeout) }
        if let requestBodyTimeout { configuration.requestBodyTimeout = duration(requestBodyTimeout) }
        if let writeStallTimeout { configuration.writeStallTimeout = duration(writeStallTimeout) }
        if let abusePenalty {
            if let initial = duration(abusePenalty) {
                var penalty = PenaltyBox.Configuration()
                penalty.initialPenalty = initial
                configuration.abusePenalty = penalty
            } else {
                configuration.abusePenalty = nil
            }
        }
        if let abuseTarpit {
            if abuseTarpit > 0 {
                configuration.abuseTarpit?.capacity = abuseTarpit
            } else {
                configuration.abuseTarpit = nil
            }
        }
        if let tlsCert, let tlsKey {
            var tls = TLSConfiguration.server(certificateChainFile: tlsCert, privateKeyFile: tlsKey)
            if let clientCa { tls.clientAuthentication = .required(trustRoots: .file(clientCa)) }
            configuration.tls = try TLSContext(configuration: tls)
        }
        // GetServerStats answers from the server's own counters (ServerContext.serverMetrics).
        let runner = ServerRunner(configuration: configuration, services: [InteropService()])
        try await runner.run(logger: logger) { address in
            print("LISTENING \(address.ipAddress ?? self.host):\(address.port ?? self.port)")
            fflush(nil)
        }
    }
}

