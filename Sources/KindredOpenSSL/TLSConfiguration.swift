/// How a ``TLSContext`` is set up: one per listening server or per client identity.
///
/// Build one with ``server(certificateChainFile:privateKeyFile:applicationProtocols:clientAuthentication:)``
/// or ``client(trustRoots:serverName:certificateChainFile:privateKeyFile:applicationProtocols:)``,
/// adjust fields if needed, and pass it to ``TLSContext/init(configuration:)``, which reads the files.
public struct TLSConfiguration: Sendable, Hashable {
    public enum Role: Sendable, Hashable {
        case server
        case client
    }

    /// Certificate authorities that peer certificates must chain to.
    public enum TrustRoots: Sendable, Hashable {
        /// The operating system's CA store (`/etc/ssl/certs` on Debian).
        case systemDefault
        /// A PEM file of one or more CA certificates.
        case file(String)
    }

    /// Whether a server asks clients for certificates (mutual TLS).
    public enum ClientAuthentication: Sendable, Hashable {
        /// Clients are not asked for a certificate.
        case none
        /// Clients are asked; one that sends none is accepted, one that sends an untrusted one is not.
        case optional(trustRoots: TrustRoots)
        /// Clients must present a certificate that chains to `trustRoots`.
        case required(trustRoots: TrustRoots)
    }

    public enum ProtocolVersion: Sendable, Hashable {
        case tls1_2
        case tls1_3
    }

    public var role: Role
    /// PEM file with the leaf certificate first, then intermediates. Required for servers; for
    /// clients only with mutual TLS.
    public var certificateChainFile: String?
    /// PEM file with the unencrypted private key (PKCS#8, PKCS#1 or SEC 1) matching the leaf.
    public var privateKeyFile: String?
    /// Clients: the CAs the server's certificate must chain to. Ignored by servers.
    public var trustRoots: TrustRoots
    /// Servers: whether and how client certificates are requested. Ignored by clients.
    public var clientAuthentication: ClientAuthentication
    /// Clients: the default server name for SNI and certificate hostname (or IP address)
    /// verification; a ``TLSHandler`` can override it per connection.
    public var serverName: String?
    /// Clients: whether the server certificate must match the server name. Turning this off is
    /// only safe when the trust roots are a private CA that issues certificates to nothing else.
    public var verifiesHostname: Bool
    /// ALPN protocols in preference order, e.g. `["h2"]`. A server with a non-empty list refuses
    /// a client that offers ALPN without any of them (alert `no_application_protocol`); a client
    /// with a non-empty list fails unless the server selects one of them.
    public var applicationProtocols: [String]
    public var minimumVersion: ProtocolVersion
    /// OpenSSL cipher list for TLS 1.2 (TLS 1.3 suites are OpenSSL's defaults, all AEAD).
    /// The default is forward-secret AEAD only, which is also what HTTP/2 (RFC 9113 §9.2.2) allows.
    public var tls12Ciphers: String

    public static let defaultTLS12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        + "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        + "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    public init(
        role: Role,
        certificateChainFile: String? = nil,
        privateKeyFile: String? = nil,
        trustRoots: TrustRoots = .systemDefault,
        clientAuthentication: ClientAuthentication = .none,
        serverName: String? = nil,
        verifiesHostname: Bool = true,
        applicationProtocols: [String] = ["h2"],
        minimumVersion: ProtocolVersion = .tls1_2,
        tls12Ciphers: String = TLSConfiguration.defaultTLS12Ciphers
    ) {
        self.role = role
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.trustRoots = trustRoots
        self.clientAuthentication = clientAuthentication
        self.serverName = serverName
        self.verifiesHostname = verifiesHostname
        self.applicationProtocols = applicationProtocols
        self.minimumVersion = minimumVersion
        self.tls12Ciphers = tls12Ciphers
    }

    /// A server configuration.
    public static func server(
        certificateChainFile: String,
        privateKeyFile: String,
        applicationProtocols: [String] = ["h2"],
        clientAuthentication: ClientAuthentication = .none
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server,
            certificateChainFile: certificateChainFile,
            privateKeyFile: privateKeyFile,
            clientAuthentication: clientAuthentication,
            applicationProtocols: applicationProtocols
        )
    }

    /// A client configuration. `serverName` may be left nil here and given per connection to
    /// ``TLSHandler/init(context:serverName:)``.
    public static func client(
        trustRoots: TrustRoots = .systemDefault,
        serverName: String? = nil,
        certificateChainFile: String? = nil,
        privateKeyFile: String? = nil,
        applicationProtocols: [String] = ["h2"]
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .client,
            certificateChainFile: certificateChainFile,
            privateKeyFile: privateKeyFile,
            trustRoots: trustRoots,
            serverName: serverName,
            applicationProtocols: applicationProtocols
        )
    }
}
