import KindredGRPC
import KindredOpenSSL
import KindredProto
import Logging

/// What `<server> healthcheck` does: asks the server's own gRPC health service and answers whether it is
/// SERVING (compose and the native cluster run it).
public enum HealthProbe {
    /// TLS for probing a server on this machine: trusts the server's own certificate file (a self-signed
    /// certificate, or a chain file that includes its root) and skips the hostname check, since the probe dials
    /// the loopback address rather than the certificate's name.
    public static func tls(trusting certificateFile: String) throws -> TLSContext {
        try TLSContext(
            configuration: TLSConfiguration(role: .client, trustRoots: .file(certificateFile), verifiesHostname: false)
        )
    }

    public static func isServing(
        _ address: HostPort,
        tls: TLSContext? = nil,
        timeout: Duration = .seconds(3)
    ) async -> Bool {
        let target = address.dialable
        var configuration = GRPCClientConfiguration(host: target.host, port: target.port, tls: tls)
        configuration.defaultTimeout = timeout
        configuration.connectionCount = 1
        let client = GRPCClient(configuration: configuration, logger: Logger(label: "kindred.healthcheck"))
        defer { Task { await client.close() } }
        let serving: Bool
        do {
            serving = try await client.unary(Grpc.Health.V1.Health.Method.check, Grpc.Health.V1.HealthCheckRequest())
                .status == .serving
        } catch {
            serving = false
        }
        await client.close()
        return serving
    }
}
