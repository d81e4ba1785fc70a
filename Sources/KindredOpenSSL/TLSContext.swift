internal import COpenSSL

/// A configured OpenSSL `SSL_CTX`: certificates, keys, trust roots, ALPN and protocol limits,
/// read once and shared by every connection of a server (or every outgoing connection of a client).
///
/// `@unchecked Sendable`: the `SSL_CTX` is fully configured in `init` and never changed afterwards;
/// OpenSSL allows `SSL_new` on one context from many threads concurrently (its session cache and
/// reference counts are locked internally).
public final class TLSContext: @unchecked Sendable {
    public let configuration: TLSConfiguration
    private let context: OpaquePointer
    /// The server's ALPN protocols in preference order, read by the selection callback.
    fileprivate let serverProtocols: [[UInt8]]

    /// Builds the context, reading the certificate, key and CA files named in `configuration`.
    /// - Throws: ``OpenSSLError`` naming the file that could not be used (never its contents), or
    ///   ``OpenSSLError/Code/invalidConfiguration``.
    public init(configuration: TLSConfiguration) throws {
        let protocols = try configuration.applicationProtocols.map { name -> [UInt8] in
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw OpenSSLError(code: .invalidConfiguration, message: "ALPN protocol names are 1 to 255 bytes")
            }
            return bytes
        }
        ERR_clear_error()
        let method = configuration.role == .server ? TLS_server_method() : TLS_client_method()
        guard let context = SSL_CTX_new(method) else {
            throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "SSL_CTX_new failed")
        }
        self.configuration = configuration
        self.context = context
        self.serverProtocols = configuration.role == .server ? protocols : []
        // From here on a throw runs deinit, which frees the context.
        try self.configure(applicationProtocols: protocols)
    }

    deinit {
        SSL_CTX_free(self.context)
    }

    private func configure(applicationProtocols: [[UInt8]]) throws {
        let configuration = self.configuration
        let version = configuration.minimumVersion == .tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION
        // Returns 1 on success, 0 for an unknown version.
        guard kindred_SSL_CTX_set_min_proto_version(self.context, version) == 1 else {
            throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "cannot set the minimum TLS version")
        }
        kindred_SSL_CTX_set_default_options(self.context)
        // Idle connections give their 34 KiB of record buffers back.
        _ = kindred_SSL_CTX_set_mode(self.context, Int(SSL_MODE_RELEASE_BUFFERS))
        // Returns 1 if at least one cipher in the list is usable.
        guard SSL_CTX_set_cipher_list(self.context, configuration.tls12Ciphers) == 1 else {
            throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "no usable cipher in the TLS 1.2 cipher list")
        }
        // An encrypted key file must fail, not block on a terminal prompt.
        SSL_CTX_set_default_passwd_cb(self.context, refusePassphrase)

        try self.loadIdentity()

        switch (configuration.role, configuration.clientAuthentication) {
        case (.client, _):
            try self.loadTrustRoots(configuration.trustRoots, advertise: false)
            SSL_CTX_set_verify(self.context, SSL_VERIFY_PEER, nil)
        case (.server, .none):
            SSL_CTX_set_verify(self.context, SSL_VERIFY_NONE, nil)
        case (.server, .optional(let roots)):
            try self.loadTrustRoots(roots, advertise: true)
            SSL_CTX_set_verify(self.context, SSL_VERIFY_PEER, nil)
        case (.server, .required(let roots)):
            try self.loadTrustRoots(roots, advertise: true)
            SSL_CTX_set_verify(self.context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
        if configuration.role == .server {
            // Session resumption with client verification needs a session id context.
            let id = Array("kindred".utf8)
            guard SSL_CTX_set_session_id_context(self.context, id, UInt32(id.count)) == 1 else {
                throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "cannot set the session id context")
            }
        }

        if !applicationProtocols.isEmpty {
            switch configuration.role {
            case .server:
                SSL_CTX_set_alpn_select_cb(
                    self.context,
                    selectApplicationProtocol,
                    Unmanaged.passUnretained(self).toOpaque()
                )
            case .client:
                let wire = applicationProtocols.flatMap { [UInt8($0.count)] + $0 }
                // Returns 0 on success (unlike most of OpenSSL).
                guard SSL_CTX_set_alpn_protos(self.context, wire, UInt32(wire.count)) == 0 else {
                    throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "cannot set the ALPN protocols")
                }
            }
        }
    }

    private func loadIdentity() throws {
        let configuration = self.configuration
        switch (configuration.certificateChainFile, configuration.privateKeyFile) {
        case (let chain?, let key?):
            // Both return 1 on success, 0 if the file is missing, unreadable or not PEM.
            guard SSL_CTX_use_certificate_chain_file(self.context, chain) == 1 else {
                throw OpenSSLError.fromErrorQueue(.certificateFile, "cannot load the certificate chain", file: chain)
            }
            guard SSL_CTX_use_PrivateKey_file(self.context, key, SSL_FILETYPE_PEM) == 1 else {
                throw OpenSSLError.fromErrorQueue(
                    .privateKeyFile,
                    "cannot load the private key (missing, not PEM, or encrypted)",
                    file: key
                )
            }
            guard SSL_CTX_check_private_key(self.context) == 1 else {
                throw OpenSSLError.fromErrorQueue(
                    .privateKeyFile,
                    "the private key does not match the certificate",
                    file: key
                )
            }
        case (nil, nil) where configuration.role == .client:
            break
        default:
            throw OpenSSLError(
                code: .invalidConfiguration,
                message: configuration.role == .server
                    ? "a server needs a certificate chain file and a private key file"
                    : "a client certificate needs both a chain file and a private key file"
            )
        }
    }

    private func loadTrustRoots(_ roots: TLSConfiguration.TrustRoots, advertise: Bool) throws {
        switch roots {
        case .systemDefault:
            // Returns 1 on success; 0 only on allocation failure (a missing directory is not an error).
            guard SSL_CTX_set_default_verify_paths(self.context) == 1 else {
                throw OpenSSLError.fromErrorQueue(.trustRootsFile, "cannot use the system trust store")
            }
        case .file(let path):
            // Returns 1 if the file held at least one certificate, 0 otherwise.
            guard SSL_CTX_load_verify_file(self.context, path) == 1 else {
                throw OpenSSLError.fromErrorQueue(.trustRootsFile, "cannot load CA certificates", file: path)
            }
            if advertise {
                // Tells clients which CAs we accept, so they can pick the right certificate.
                guard let names = SSL_load_client_CA_file(path) else {
                    throw OpenSSLError.fromErrorQueue(.trustRootsFile, "cannot read CA names", file: path)
                }
                SSL_CTX_set_client_CA_list(self.context, names)
            }
        }
    }

    /// A new `SSL` for one connection, reading and writing through two memory BIOs.
    func makeConnection(serverName: String?) throws -> SSLConnection {
        ERR_clear_error()
        guard let ssl = SSL_new(self.context) else {
            throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "SSL_new failed")
        }
        guard let inbound = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "BIO_new failed")
        }
        guard let outbound = BIO_new(BIO_s_mem()) else {
            BIO_free(inbound)
            SSL_free(ssl)
            throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "BIO_new failed")
        }
        // An empty BIO means "no data yet" (retry), not end of file.
        _ = kindred_BIO_set_mem_eof_return(inbound, -1)
        _ = kindred_BIO_set_mem_eof_return(outbound, -1)
        SSL_set_bio(ssl, inbound, outbound)  // the SSL owns both BIOs now
        let connection = SSLConnection(takingOwnership: ssl, inbound: inbound, outbound: outbound, context: self)
        switch self.configuration.role {
        case .server:
            connection.setAcceptState()
        case .client:
            try connection.setConnectState(
                serverName: serverName ?? self.configuration.serverName,
                verifiesHostname: self.configuration.verifiesHostname
            )
        }
        return connection
    }
}

/// ALPN selection (`SSL_CTX_alpn_select_cb_func`): the first of the server's protocols, in its
/// preference order, that the client offered. A client that offered ALPN but none of ours gets a
/// fatal `no_application_protocol` alert (RFC 7301 §3.2). `out` points into the client's list,
/// which OpenSSL copies before the callback's buffers go away.
private let selectApplicationProtocol:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, offered, offeredLength, argument in
        guard let out, let outLength, let offered, let argument else { return SSL_TLSEXT_ERR_ALERT_FATAL }
        let context = Unmanaged<TLSContext>.fromOpaque(argument).takeUnretainedValue()
        let list = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
        for wanted in context.serverProtocols {
            var index = 0
            while index < list.count {
                let length = Int(list[index])
                let start = index + 1
                guard length > 0, start + length <= list.count else { break }  // malformed: stop
                if length == wanted.count && list[start..<(start + length)].elementsEqual(wanted) {
                    out.pointee = offered + start
                    outLength.pointee = UInt8(length)
                    return SSL_TLSEXT_ERR_OK
                }
                index = start + length
            }
        }
        return SSL_TLSEXT_ERR_ALERT_FATAL
    }
