import KindredGRPC
import KindredGRPCServices
import KindredProto
import Testing

@testable import KindredGateway

@Suite("The client address from a proxy header: what the trusted proxies appended, never what the client wrote")
struct ForwardedClientAddressTests {
    @Test(
        "header values → the client address (nil: use the connection's address)",
        arguments: [
            // One proxy (the default): the last entry, whatever the client put before it.
            (1, ["203.0.113.7"], Optional("203.0.113.7")),
            (1, ["1.2.3.4, 203.0.113.7"], "203.0.113.7"),
            (1, ["  1.2.3.4 ,\t203.0.113.7  "], "203.0.113.7"),
            (1, ["1.2.3.4,203.0.113.7"], "203.0.113.7"),
            // Two proxies (a CDN, then a load balancer): the second from the right.
            (2, ["1.2.3.4, 203.0.113.7, 10.0.0.2"], "203.0.113.7"),
            (3, ["1.2.3.4, 203.0.113.7, 10.0.0.2, 10.0.0.3"], "203.0.113.7"),
            // Several header lines are one list, in order.
            (2, ["1.2.3.4", "203.0.113.7, 10.0.0.2"], "203.0.113.7"),
            // IPv6: bare, bracketed, with a port, in any spelling: one canonical key.
            (1, ["2001:db8::1"], "2001:db8::1"),
            (1, ["[2001:DB8::1]"], "2001:db8::1"),
            (1, ["[2001:db8::1]:443"], "2001:db8::1"),
            (1, ["2001:db8:0:0:0:0:0:1"], "2001:db8::1"),
            (1, ["1.2.3.4, ::1"], "::1"),
            // IPv4 with a port (some load balancers add it).
            (1, ["203.0.113.7:5555"], "203.0.113.7"),
            // Too few entries: the request did not pass through every trusted proxy.
            (2, ["203.0.113.7"], nil),
            (3, ["1.2.3.4, 203.0.113.7"], nil),
            (1, [], nil),
            // Garbage where the address should be.
            (1, [""], nil),
            (1, ["1.2.3.4,"], nil),
            (1, ["1.2.3.4, "], nil),
            (1, ["unknown"], nil),
            (1, ["1.2.3.4, evil.example"], nil),
            (1, ["999.1.1.1"], nil),
            (1, ["1.2.3"], nil),
            (1, ["1.2.3.4\u{0}"], nil),
            (1, ["[2001:db8::1"], nil),
            (1, ["[2001:db8::1]x"], nil),
            (1, ["203.0.113.7:99999"], nil),
            (1, ["203.0.113.7:+80"], nil),
            (1, ["fe80::1%eth0"], nil),
            (1, ["for=203.0.113.7"], nil),
            // Garbage to the left is the client's business: it is never read.
            (1, ["not an address, 203.0.113.7"], "203.0.113.7"),
        ] as [(Int, [String], String?)]
    )
    func parse(trustedProxies: Int, values: [String], expected: String?) {
        #expect(ForwardedClientAddress(trustedProxies: trustedProxies).clientAddress(headerValues: values) == expected)
    }

    @Test("KINDRED_GATEWAY_TRUSTED_PROXIES: default 1, 1..16")
    func setting() throws {
        #expect(try GatewayConfiguration(environment: [:]).trustedProxies == 1)
        #expect(try GatewayConfiguration(environment: ["KINDRED_GATEWAY_TRUSTED_PROXIES": "2"]).trustedProxies == 2)
        for value in ["0", "17", "two"] {
            let error = try #require(throws: ConfigurationError.self) {
                try GatewayConfiguration(environment: ["KINDRED_GATEWAY_TRUSTED_PROXIES": value])
            }
            #expect(error.key == "KINDRED_GATEWAY_TRUSTED_PROXIES")
        }
    }

    @Test("through the gateway: a client that rotates the entries it writes keeps the bucket of its real address")
    func rateLimitKey() async throws {
        try await GatewayHarness.with(configure: {
            $0.clientIPHeader = "x-forwarded-for"
            $0.anonymousBurst = 3
            $0.anonymousRate = 0.1
        }) { harness in
            var check = Api.CheckUsernameRequest()
            check.communityId = harness.community
            check.username = "dave"
            func call(_ forwardedFor: String) async throws {
                _ = try await harness.client.unary(
                    Account.checkUsername,
                    check,
                    metadata: ["x-forwarded-for": .string(forwardedFor)]
                )
            }
            for index in 0..<3 { try await call("10.9.8.\(index), 198.51.100.7") }
            _ = await expectRPCError(.resourceExhausted) { try await call("10.9.8.99, 198.51.100.7") }
            // Another client behind the same proxy has its own bucket.
            try await call("10.9.8.1, 198.51.100.8")
        }
    }
}
