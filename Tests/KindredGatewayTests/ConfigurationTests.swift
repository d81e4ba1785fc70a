import KindredGRPCServices
import KindredGateway
import Testing

@Suite("Gateway configuration")
struct ConfigurationTests {
    @Test("defaults match the documented local addresses")
    func defaults() throws {
        let configuration = try GatewayConfiguration(environment: [:])
        #expect(configuration.endpoint.listen == HostPort(host: "127.0.0.1", port: 50050))
        #expect(configuration.endpoint.adminListen == HostPort(host: "127.0.0.1", port: 50150))
        #expect(configuration.authAddress == ServiceAddress(host: "127.0.0.1", port: 50051))
        #expect(configuration.profileAddress == nil)
    }

    @Test("values parse; bad values name the key, never the value")
    func parsing() throws {
        let configuration = try GatewayConfiguration(environment: [
            "KINDRED_GATEWAY_LISTEN": "0.0.0.0:6000", "KINDRED_GATEWAY_ADMIN_LISTEN": "off",
            "KINDRED_GATEWAY_AUTH_ADDRESS": "auth:50051", "KINDRED_GATEWAY_CLIENT_RATE": "2.5",
            "KINDRED_GATEWAY_DOWNSTREAM_TIMEOUT_MS": "750",
        ])
        #expect(configuration.endpoint.listen == HostPort(host: "0.0.0.0", port: 6000))
        #expect(configuration.endpoint.adminListen == nil)
        #expect(configuration.authAddress == ServiceAddress(host: "auth", port: 50051))
        #expect(configuration.clientRate == 2.5)
        #expect(configuration.downstreamTimeout == .milliseconds(750))

        let replicas = try GatewayConfiguration(environment: [
            "KINDRED_GATEWAY_CHAT_ADDRESS": "127.0.0.1:50055, 127.0.0.1:50065", "KINDRED_GATEWAY_MATCH_ADDRESS": "off",
        ])
        #expect(
            replicas.chatAddress?.replicas
                == [HostPort(host: "127.0.0.1", port: 50055), HostPort(host: "127.0.0.1", port: 50065)])
        #expect(replicas.matchAddress == nil)

        for (key, value) in [
            ("KINDRED_GATEWAY_CHAT_ADDRESS", "127.0.0.1:1,,127.0.0.1:2"), ("KINDRED_GATEWAY_AUTH_ADDRESS", "a:1,a:1"),
            ("KINDRED_GATEWAY_LISTEN", "secret-value"), ("KINDRED_GATEWAY_CLIENT_BURST", "-1"),
            ("KINDRED_GATEWAY_TLS_CERT_FILE", "/only/the/cert.pem"),
        ] {
            do {
                _ = try GatewayConfiguration(environment: [key: value])
                Issue.record("\(key)=\(value) accepted")
            } catch let error as ConfigurationError {
                #expect(error.key == key)
                #expect(!error.description.contains("secret-value"))
            }
        }
    }
}
