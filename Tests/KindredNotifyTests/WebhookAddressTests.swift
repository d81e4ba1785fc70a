import Foundation
import KindredGRPC
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import NIOCore
import Testing

@testable import KindredNotify

private typealias W = Kindred.Notify.V1.WebhookService.Method

/// Webhook endpoints never reach the deployment's own network: a URL naming a loopback, private, link-local,
/// unspecified or multicast address (or `localhost`) is refused at registration with INVALID_ARGUMENT
/// HOST_NOT_ALLOWED, and a name that resolves to such an address when notify connects (DNS rebinding) is refused
/// on the address the connection reached, before a byte is sent. `KINDRED_NOTIFY_WEBHOOK_ALLOW_PRIVATE_HOSTS`
/// (development, tests) lets both through.
@Suite("Webhook hosts and addresses")
struct WebhookAddressTests {
    static let refused = [
        "https://127.0.0.1/x", "https://127.8.9.10:8443/x", "https://10.1.2.3/x", "https://172.16.0.1/x",
        "https://172.31.255.254/x", "https://192.168.1.1/x", "https://169.254.169.254/latest/meta-data",
        "https://0.0.0.0/x", "https://224.0.0.1/x", "https://255.255.255.255/x", "https://[::1]/x",
        "https://[::]/x", "https://[fd12:3456::1]/x", "https://[fc00::1]/x", "https://[fe80::1]/x",
        "https://[ff02::1]/x", "https://[::ffff:127.0.0.1]/x", "https://[::ffff:169.254.169.254]/x",
        "https://localhost/x", "https://LOCALHOST:8443/x", "https://api.localhost/x",
    ]

    @Test(arguments: Self.refused)
    func privateHostsAreRefused(text: String) throws {
        #expect(throws: WebhookURL.Invalid(hint: WebhookAddressPolicy.hint, reason: "HOST_NOT_ALLOWED")) {
            try WebhookURL(text, httpHosts: ["localhost", "127.0.0.1"])
        }
        // Allowed in development and tests.
        #expect(try WebhookURL(text, httpHosts: [], allowPrivateHosts: true).secure)
    }

    @Test(arguments: [
        "https://8.8.8.8/x", "https://172.32.0.1/x", "https://172.15.255.255/x", "https://169.253.0.1/x",
        "https://223.255.255.255/x", "https://[2001:db8::1]/x", "https://[fec0::1]/x", "https://hooks.example.com/x",
        "https://localhost.example.com/x",
    ])
    func publicHostsAreAccepted(text: String) throws {
        #expect(try WebhookURL(text, httpHosts: []).secure)
    }

    @Test func httpOnlyInDevelopment() throws {
        #expect(throws: WebhookURL.Invalid.self) { try WebhookURL("http://127.0.0.1:9000/x", httpHosts: ["127.0.0.1"]) }
        #expect(throws: WebhookURL.Invalid.self) {
            try WebhookURL("http://hooks.example.com/x", httpHosts: ["127.0.0.1"], allowPrivateHosts: true)
        }
        #expect(try !WebhookURL("http://127.0.0.1:9000/x", httpHosts: ["127.0.0.1"], allowPrivateHosts: true).secure)
    }

    @Test func registrationRefusesThemAndStoresNothing() async throws {
        try await NotifyHarness.with { harness in
            for url in ["https://169.254.169.254/latest/meta-data", "https://[fd00::1]/hook", "http://127.0.0.1/x"] {
                let request = Notify.CreateWebhookEndpointRequest.with {
                    $0.url = url
                    $0.eventTypes = ["match.created"]
                }
                let code = await harness.client.failureCode(W.createWebhookEndpoint, request, token: WebhookAdminTests.admin)
                #expect(code == .invalidArgument, "\(url)")
            }
            let listed = try await harness.client.call(W.listWebhookEndpoints, .init(), token: WebhookAdminTests.admin)
            #expect(listed.endpoints.isEmpty)
        }
    }

    /// The machine's host name, when it resolves to a loopback address (Debian's /etc/hosts names it): a name that
    /// passes registration but leads to this machine, as a rebinding name would.
    static let loopbackName: String? = {
        let name = ProcessInfo.processInfo.hostName
        guard !name.isEmpty, name != "localhost",
            let address = try? SocketAddress.makeAddressResolvingHost(name, port: 0),
            !WebhookAddressPolicy.allows(address)
        else { return nil }
        return name
    }()

    @Test(.enabled(if: Self.loopbackName != nil, "the host name does not resolve to a loopback address"))
    func aNameResolvingToAPrivateAddressIsRefusedWhenConnecting() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_WEBHOOK_POLL_MS": "50",
                                                "KINDRED_NOTIFY_WEBHOOK_TIMEOUT_MS": "1000"]) { harness in
            // Something listens there (notify's own port), so without the check the connection would be made.
            let url = "https://\(Self.loopbackName!):\(harness.server.port)/hook"
            let endpoint = try #require(try await WebhookAdminTests.create(harness, url).endpoint).endpointId
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let event = try QueueTests.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            let deadline = ContinuousClock.now + .seconds(60)
            var lastError = ""
            while ContinuousClock.now < deadline {
                lastError = try await WebhookAdminTests.deliveries(harness, endpoint).first?.lastError ?? ""
                if !lastError.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(lastError.hasPrefix("the host resolved to a refused address"), "\(lastError)")
        }
    }
}
