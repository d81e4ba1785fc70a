import Foundation
import KindredOpenSSL
import NIOCore
import NIOPosix
import Testing

@Suite("TLSHandler", .timeLimit(.minutes(2)))
struct TLSHandlerTests {
    let pki: TestPKI

    init() throws {
        self.pki = try TestPKI.get()
    }

    var serverConfiguration: TLSConfiguration {
        .server(certificateChainFile: self.pki.serverCertificate, privateKeyFile: self.pki.serverKey)
    }

    var clientConfiguration: TLSConfiguration {
        .client(trustRoots: .file(self.pki.caCertificate))
    }

    @Test(arguments: [1, 100, 16383, 16384, 16385, 100_000, 1 << 20])
    func echoesData(size: Int) async throws {
        let server = try await TestServer(self.serverConfiguration)
        let payload = try SecureRandom.bytes(count: size)
        let client = try await TestClient(
            port: server.port,
            configuration: self.clientConfiguration,
            expectedBytes: size
        )
        let handshake = try await client.handshake.get()
        #expect(handshake.negotiatedProtocol == "h2")
        #expect(handshake.protocolVersion == "TLSv1.3")
        #expect(handshake.peerCertificateVerified)
        #expect(handshake.peerCertificateSubject == "CN=localhost")
        guard case .handshake(let serverSide) = await server.firstEvent() else {
            Issue.record("server handshake did not complete")
            return
        }
        #expect(serverSide.negotiatedProtocol == "h2")
        #expect(serverSide.peerCertificateSubject == nil)

        try await client.send([payload])
        let echoed = try await client.received.get()
        #expect(echoed.readableBytes == size)
        #expect(Array(echoed.readableBytesView) == payload)
        try await client.channel.close()
        try await server.stop()
    }

    /// Many small writes in one flush share records; a write issued before the handshake completes
    /// is held and sent afterwards.
    @Test func coalescesSmallWritesAndHoldsEarlyWrites() async throws {
        let server = try await TestServer(self.serverConfiguration)
        let chunks = (0..<2000).map { index in
            [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 1 + index % 50)
        }
        let total = chunks.reduce(0) { $0 + $1.count }
        let client = try await TestClient(
            port: server.port,
            configuration: self.clientConfiguration,
            expectedBytes: total
        )
        try await client.send(chunks)  // probably before the handshake has finished
        let echoed = try await client.received.get()
        #expect(Array(echoed.readableBytesView) == chunks.flatMap { $0 })
        try await client.channel.close()
        try await server.stop()
    }

    /// With auto-read off, the handler reads on its own during the handshake and again whenever
    /// ciphertext yielded no plaintext for a reader that asked for data.
    @Test func worksWithAutoReadOff() async throws {
        let server = try await TestServer(self.serverConfiguration)
        let payload = try SecureRandom.bytes(count: 200_000)
        let client = try await TestClient(
            port: server.port,
            configuration: self.clientConfiguration,
            expectedBytes: payload.count,
            autoRead: false
        )
        #expect(try await client.handshake.get().negotiatedProtocol == "h2")
        try await client.send([payload])
        #expect(Array(try await client.received.get().readableBytesView) == payload)
        try await client.channel.close()
        try await server.stop()
    }

    /// The client half-closes (close_notify, then TCP FIN); the server, allowing half-closure,
    /// sees `inputClosed`, still answers, and closes; the client reads the answer before its close.
    @Test func halfClosureDeliversCloseNotifyAsInputClosed() async throws {
        let server = try await TestServer(self.serverConfiguration, remoteHalfClosure: true) {
            CountThenReplyHandler()
        }
        let expected = "received 50000 bytes"
        let client = try await TestClient(
            port: server.port,
            configuration: self.clientConfiguration,
            expectedBytes: expected.utf8.count,
            remoteHalfClosure: true
        )
        try await client.send([try SecureRandom.bytes(count: 50_000)])
        try await client.channel.close(mode: .output)
        #expect(String(buffer: try await client.received.get()) == expected)
        try await client.channel.closeFuture.get()
        try await server.stop()
    }

    /// Without half-closure, a close_notify from the client makes the server answer with its own
    /// and close: the client's channel closes without error.
    @Test func closeIsClean() async throws {
        let server = try await TestServer(self.serverConfiguration)
        let client = try await TestClient(port: server.port, configuration: self.clientConfiguration, expectedBytes: 3)
        try await client.send([Array("abc".utf8)])
        _ = try await client.received.get()
        try await client.channel.close()
        var events = server.events.makeAsyncIterator()
        guard case .handshake = await events.next() else {
            Issue.record("server handshake did not complete")
            return
        }
        guard case .closed = await events.next() else {
            Issue.record("server connection should close without error")
            return
        }
        try await server.stop()
    }

    @Test func clientRejectsServerFromAnotherCA() async throws {
        let server = try await TestServer(
            .server(certificateChainFile: self.pki.otherServerCertificate, privateKeyFile: self.pki.otherServerKey)
        )
        let client = try await TestClient(port: server.port, configuration: self.clientConfiguration)
        let error = try await #require(throws: OpenSSLError.self) { try await client.handshake.get() }
        #expect(error.code == .handshakeFailed)
        #expect(error.verificationFailure == "unable to get local issuer certificate")
        guard case .error(let serverError) = await server.firstEvent() else {
            Issue.record("server should have failed")
            return
        }
        #expect(serverError.contains("alert unknown ca"))
        try await server.stop()
    }

    @Test(arguments: ["example.com", "127.0.0.2", "localhost.evil"])
    func clientRejectsHostnameMismatch(serverName: String) async throws {
        let server = try await TestServer(self.serverConfiguration)
        let client = try await TestClient(
            port: server.port,
            configuration: self.clientConfiguration,
            serverName: serverName
        )
        let error = try await #require(throws: OpenSSLError.self) { try await client.handshake.get() }
        #expect(error.code == .handshakeFailed)
        #expect(error.verificationFailure?.contains("mismatch") == true)
        try await server.stop()
    }

    @Test func clientVerifiesIPAddressSAN() async throws {
        let server = try await TestServer(self.serverConfiguration)
        let client = try await TestClient(
            port: server.port,
            configuration: self.clientConfiguration,
            serverName: "127.0.0.1"
        )
        #expect(try await client.handshake.get().peerCertificateVerified)
        try await client.channel.close()
        try await server.stop()
    }

    @Test func clientNeedsAServerNameToVerify() throws {
        let context = try TLSContext(configuration: self.clientConfiguration)
        let error = try #require(throws: OpenSSLError.self) { try TLSHandler(context: context) }
        #expect(error.code == .invalidConfiguration)
    }

    @Test func requiredClientCertificateMissingFails() async throws {
        var configuration = self.serverConfiguration
        configuration.clientAuthentication = .required(trustRoots: .file(self.pki.caCertificate))
        let server = try await TestServer(configuration)
        let client = try await TestClient(port: server.port, configuration: self.clientConfiguration, expectedBytes: 5)
        // In TLS 1.3 the client finishes its handshake before the server checks its certificate,
        // so the failure may show on the handshake or on the first read.
        _ = try? await client.handshake.get()
        try? await client.send([Array("hello".utf8)])
        let error = try await #require(throws: (any Error).self) { try await client.received.get() }
        #expect("\(error)".contains("certificate required") || error is ChannelError)
        guard case .error(let serverError) = await server.firstEvent() else {
            Issue.record("server should have failed")
            return
        }
        #expect(serverError.contains("peer did not return a certificate"))
        try await server.stop()
    }

    @Test func requiredClientCertificatePresentSucceeds() async throws {
        var configuration = self.serverConfiguration
        configuration.clientAuthentication = .required(trustRoots: .file(self.pki.caCertificate))
        let server = try await TestServer(configuration)
        var clientConfiguration = self.clientConfiguration
        clientConfiguration.certificateChainFile = self.pki.clientCertificate
        clientConfiguration.privateKeyFile = self.pki.clientKey
        let client = try await TestClient(port: server.port, configuration: clientConfiguration, expectedBytes: 5)
        _ = try await client.handshake.get()
        guard case .handshake(let serverSide) = await server.firstEvent() else {
            Issue.record("server handshake did not complete")
            return
        }
        #expect(serverSide.peerCertificateVerified)
        #expect(serverSide.peerCertificateSubject == "O=Kindred,CN=kindred-test-client")
        try await client.send([Array("hello".utf8)])
        #expect(String(buffer: try await client.received.get()) == "hello")
        try await client.channel.close()
        try await server.stop()
    }

    @Test func clientCertificateFromAnotherCAIsRejected() async throws {
        var configuration = self.serverConfiguration
        configuration.clientAuthentication = .optional(trustRoots: .file(self.pki.caCertificate))
        let server = try await TestServer(configuration)
        var clientConfiguration = self.clientConfiguration
        clientConfiguration.certificateChainFile = self.pki.otherServerCertificate
        clientConfiguration.privateKeyFile = self.pki.otherServerKey
        let client = try await TestClient(port: server.port, configuration: clientConfiguration, expectedBytes: 5)
        _ = try? await client.handshake.get()
        try? await client.send([Array("hello".utf8)])
        _ = try await #require(throws: (any Error).self) { try await client.received.get() }
        guard case .error(let serverError) = await server.firstEvent() else {
            Issue.record("server should have failed")
            return
        }
        #expect(serverError.contains("unable to get local issuer certificate"))
        try await server.stop()
    }

    @Test func optionalClientCertificateMayBeAbsent() async throws {
        var configuration = self.serverConfiguration
        configuration.clientAuthentication = .optional(trustRoots: .file(self.pki.caCertificate))
        let server = try await TestServer(configuration)
        let client = try await TestClient(port: server.port, configuration: self.clientConfiguration, expectedBytes: 2)
        try await client.send([Array("hi".utf8)])
        #expect(String(buffer: try await client.received.get()) == "hi")
        guard case .handshake(let serverSide) = await server.firstEvent() else {
            Issue.record("server handshake did not complete")
            return
        }
        #expect(!serverSide.peerCertificateVerified)
        try await client.channel.close()
        try await server.stop()
    }

    @Test func h2ServerRejectsClientOfferingOnlyHTTP1() async throws {
        let server = try await TestServer(self.serverConfiguration)
        var clientConfiguration = self.clientConfiguration
        clientConfiguration.applicationProtocols = ["http/1.1"]
        let client = try await TestClient(port: server.port, configuration: clientConfiguration)
        let error = try await #require(throws: OpenSSLError.self) { try await client.handshake.get() }
        #expect(error.code == .handshakeFailed)
        #expect(error.reasons.contains { $0.contains("no application protocol") })
        guard case .error = await server.firstEvent() else {
            Issue.record("server should have failed")
            return
        }
        try await server.stop()
    }

    @Test func clientWithoutALPNIsAccepted() async throws {
        let server = try await TestServer(self.serverConfiguration)
        var clientConfiguration = self.clientConfiguration
        clientConfiguration.applicationProtocols = []
        let client = try await TestClient(port: server.port, configuration: clientConfiguration)
        #expect(try await client.handshake.get().negotiatedProtocol == nil)
        try await client.channel.close()
        try await server.stop()
    }

    @Test func h2ClientRejectsServerWithoutALPN() async throws {
        var configuration = self.serverConfiguration
        configuration.applicationProtocols = []
        let server = try await TestServer(configuration)
        let client = try await TestClient(port: server.port, configuration: self.clientConfiguration)
        let error = try await #require(throws: OpenSSLError.self) { try await client.handshake.get() }
        #expect(error.code == .applicationProtocolNotNegotiated)
        try await server.stop()
    }

    @Test func missingFilesAreNamedWithoutContents() throws {
        let missing = self.pki.directory + "/missing.pem"
        let error = try #require(throws: OpenSSLError.self) {
            try TLSContext(configuration: .server(certificateChainFile: missing, privateKeyFile: self.pki.serverKey))
        }
        #expect(error.code == .certificateFile)
        #expect("\(error)".contains(missing))

        // A key that does not match the certificate: the message names the key file, not the key.
        let mismatch = try #require(throws: OpenSSLError.self) {
            try TLSContext(
                configuration: .server(
                    certificateChainFile: self.pki.serverCertificate,
                    privateKeyFile: self.pki.clientKey
                )
            )
        }
        #expect(mismatch.code == .privateKeyFile)
        #expect("\(mismatch)".contains(self.pki.clientKey))
        let keyText = try String(contentsOfFile: self.pki.clientKey, encoding: .utf8)
        let keyBody = keyText.split(separator: "\n")[1]
        #expect(!"\(mismatch)".contains(keyBody))

        let caError = try #require(throws: OpenSSLError.self) {
            try TLSContext(configuration: .client(trustRoots: .file(self.pki.serverKey)))
        }
        #expect(caError.code == .trustRootsFile)
    }

    @Test func encryptedKeyFailsInsteadOfPrompting() throws {
        let encrypted = self.pki.directory + "/encrypted.key"
        try runChecked([
            "openssl", "pkey", "-in", self.pki.serverKey, "-aes256", "-passout", "pass:secret", "-out", encrypted,
        ])
        let error = try #require(throws: OpenSSLError.self) {
            try TLSContext(
                configuration: .server(certificateChainFile: self.pki.serverCertificate, privateKeyFile: encrypted)
            )
        }
        #expect(error.code == .privateKeyFile)
    }

    // MARK: Independent peers

    @Test func opensslSClientNegotiatesH2() async throws {
        let server = try await TestServer(self.serverConfiguration)
        let port = server.port
        let pki = self.pki
        let (status, output) = try await Task.detached {
            try run(
                [
                    "timeout", "20", "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-alpn", "h2",
                    "-servername", "localhost", "-CAfile", pki.caCertificate, "-verify_return_error",
                ],
                input: Array("ping\n".utf8)
            )
        }.value
        #expect(status == 0, "\(output)")
        #expect(output.contains("ALPN protocol: h2"), "\(output)")
        #expect(output.contains("Verify return code: 0 (ok)"), "\(output)")

        let (rejectedStatus, rejected) = try await Task.detached {
            try run(
                [
                    "timeout", "20", "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-alpn", "http/1.1",
                    "-servername", "localhost", "-CAfile", pki.caCertificate,
                ],
                input: []
            )
        }.value
        #expect(rejectedStatus != 0)
        #expect(rejected.contains("no application protocol"), "\(rejected)")
        try await server.stop()
    }

    /// Python's `ssl` module as client: echo, ALPN, TLS 1.2 and 1.3, and a clean close_notify
    /// exchange (`unwrap()` waits for ours).
    @Test(arguments: ["1.3", "1.2"])
    func pythonClientEchoes(version: String) async throws {
        let server = try await TestServer(self.serverConfiguration)
        let port = server.port
        let pki = self.pki
        let script = """
            import socket, ssl, sys
            ctx = ssl.create_default_context(cafile=sys.argv[2])
            ctx.set_alpn_protocols(['h2'])
            if sys.argv[3] == '1.2':
                ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            with socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=15) as raw:
                tls = ctx.wrap_socket(raw, server_hostname='localhost')
                payload = bytes(range(256)) * 1000
                tls.sendall(payload)
                got = b''
                while len(got) < len(payload):
                    chunk = tls.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                print(tls.selected_alpn_protocol(), tls.version(), got == payload)
                tls.unwrap()
                print('clean shutdown')
            """
        let (status, output) = try await Task.detached {
            try run(["timeout", "30", "python3", "-c", script, "\(port)", pki.caCertificate, version])
        }.value
        #expect(status == 0, "\(output)")
        #expect(output.contains("h2 TLSv\(version) True"), "\(output)")
        #expect(output.contains("clean shutdown"), "\(output)")
        try await server.stop()
    }

    /// Python's `ssl` module as server, the Swift handler as client.
    @Test func swiftClientAgainstPythonServer() async throws {
        let script = """
            import socket, ssl, sys
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(sys.argv[1], sys.argv[2])
            ctx.set_alpn_protocols(['h2'])
            server = socket.socket()
            server.bind(('127.0.0.1', 0))
            server.listen(1)
            server.settimeout(20)
            print(server.getsockname()[1], flush=True)
            conn, _ = server.accept()
            with ctx.wrap_socket(conn, server_side=True) as tls:
                while True:
                    data = tls.recv(65536)
                    if not data:
                        break
                    tls.sendall(data)
            print('peer closed cleanly', flush=True)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["timeout", "30", "python3", "-c", script, self.pki.serverCertificate, self.pki.serverKey]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer { process.terminate() }
        let reader = output.fileHandleForReading
        let portLine = await Task.detached { () -> String in
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                line.append(chunk)
            }
            return String(decoding: line, as: UTF8.self)
        }.value
        let port = try #require(Int(portLine.trimmingCharacters(in: .whitespacesAndNewlines)))

        let payload = try SecureRandom.bytes(count: 300_000)
        let client = try await TestClient(
            port: port,
            configuration: self.clientConfiguration,
            expectedBytes: payload.count
        )
        #expect(try await client.handshake.get().negotiatedProtocol == "h2")
        try await client.send([payload])
        #expect(Array(try await client.received.get().readableBytesView) == payload)
        try await client.channel.close()
        let rest = await Task.detached { String(decoding: reader.readDataToEndOfFile(), as: UTF8.self) }.value
        #expect(rest.contains("peer closed cleanly"))
    }
}
