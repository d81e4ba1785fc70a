internal import COpenSSL
import NIOCore

/// Owns one connection's `SSL` and, through it, its two memory BIOs: `inbound` carries ciphertext
/// from the network into OpenSSL, `outbound` carries ciphertext from OpenSSL to the network.
///
/// Not thread-safe: used only on its channel's event loop by ``TLSHandler``.
final class SSLConnection {
    enum HandshakeResult {
        case complete
        case wantRead
        case failed(OpenSSLError)
    }

    enum ReadResult {
        /// The buffer is full; more plaintext may be ready.
        case bufferFull
        /// All buffered ciphertext is consumed (a partial record may wait for more bytes).
        case wantRead
        /// The peer sent close_notify.
        case closeNotify
        case failed(OpenSSLError)
    }

    /// Keeps the context (and so the ALPN callback's argument) alive as long as the `SSL`.
    let context: TLSContext
    private let ssl: OpaquePointer
    private let inbound: OpaquePointer
    private let outbound: OpaquePointer

    /// - Parameters: `ssl` is owned from now on; `inbound` and `outbound` are its BIOs (owned by it).
    init(takingOwnership ssl: OpaquePointer, inbound: OpaquePointer, outbound: OpaquePointer, context: TLSContext) {
        self.ssl = ssl
        self.inbound = inbound
        self.outbound = outbound
        self.context = context
    }

    deinit {
        SSL_free(self.ssl)
    }

    func setAcceptState() {
        SSL_set_accept_state(self.ssl)
    }

    func setConnectState(serverName: String?, verifiesHostname: Bool) throws {
        ERR_clear_error()
        var isIPAddress = false
        if let serverName {
            // Returns 1 if the name is an IP address literal, which is then matched against the
            // certificate's IP SANs; SNI must not carry IP addresses (RFC 6066 §3).
            isIPAddress = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(self.ssl), serverName) == 1
            ERR_clear_error()
            if !isIPAddress {
                guard kindred_SSL_set_tlsext_host_name(self.ssl, serverName) == 1 else {
                    throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "invalid server name for SNI")
                }
            }
        }
        if verifiesHostname {
            guard let serverName else {
                throw OpenSSLError(
                    code: .invalidConfiguration,
                    message: "a client that verifies hostnames needs a server name"
                )
            }
            if !isIPAddress {
                SSL_set_hostflags(self.ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
                guard SSL_set1_host(self.ssl, serverName) == 1 else {
                    throw OpenSSLError.fromErrorQueue(.invalidConfiguration, "invalid server name")
                }
            }
        } else if isIPAddress {
            // The IP was set for verification above; the caller asked for none.
            _ = X509_VERIFY_PARAM_set1_ip(SSL_get0_param(self.ssl), nil, 0)
        }
        SSL_set_connect_state(self.ssl)
    }

    /// Hands received ciphertext to OpenSSL (one copy into the inbound memory BIO).
    func receive(_ buffer: ByteBuffer) -> OpenSSLError? {
        buffer.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
            var written = 0
            ERR_clear_error()
            // A memory BIO takes everything; it fails only if it cannot grow.
            guard BIO_write_ex(self.inbound, base, bytes.count, &written) == 1, written == bytes.count else {
                return OpenSSLError.fromErrorQueue(.connectionFailed, "cannot buffer received data")
            }
            return nil
        }
    }

    func handshake() -> HandshakeResult {
        ERR_clear_error()
        let result = SSL_do_handshake(self.ssl)
        if result == 1 { return .complete }
        switch SSL_get_error(self.ssl, result) {
        case SSL_ERROR_WANT_READ:
            return .wantRead
        default:
            // SSL_ERROR_SSL: protocol error, verification failure or alert from the peer;
            // SSL_ERROR_SYSCALL cannot come from memory BIOs but is an error all the same.
            return .failed(self.error(.handshakeFailed, "TLS handshake failed"))
        }
    }

    /// Decrypts into `buffer`'s writable space until it is full or no complete record is left.
    func read(into buffer: inout ByteBuffer) -> ReadResult {
        var outcome = ReadResult.bufferFull
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { space in
            var total = 0
            reading: while total < space.count {
                var read = 0
                ERR_clear_error()
                // Returns 1 with `read` > 0, or 0 with the reason in SSL_get_error.
                if SSL_read_ex(self.ssl, space.baseAddress! + total, space.count - total, &read) == 1 {
                    total += read
                    continue
                }
                switch SSL_get_error(self.ssl, 0) {
                case SSL_ERROR_WANT_READ:
                    outcome = .wantRead
                case SSL_ERROR_ZERO_RETURN:
                    outcome = .closeNotify
                default:
                    outcome = .failed(self.error(.connectionFailed, "TLS read failed"))
                }
                break reading
            }
            return total
        }
        return outcome
    }

    /// Whether ciphertext is waiting to be decrypted.
    var hasBufferedInput: Bool {
        BIO_ctrl_pending(self.inbound) > 0 || SSL_has_pending(self.ssl) == 1
    }

    /// Encrypts all of `buffer`'s readable bytes into the outbound BIO.
    func send(_ buffer: ByteBuffer) -> OpenSSLError? {
        buffer.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
            var written = 0
            ERR_clear_error()
            // Without SSL_MODE_ENABLE_PARTIAL_WRITE and with a memory BIO this writes all bytes or fails
            // (after our close_notify, after a fatal error, or on allocation failure).
            guard SSL_write_ex(self.ssl, base, bytes.count, &written) == 1 else {
                return self.error(.connectionFailed, "TLS write failed")
            }
            assert(written == bytes.count)
            return nil
        }
    }

    /// Queues close_notify in the outbound BIO.
    func shutdown() {
        ERR_clear_error()
        // 0: close_notify sent, the peer's not yet received; 1: both done; < 0: error (e.g. after
        // a fatal alert, when no close_notify may be sent). None of these needs handling here.
        _ = SSL_shutdown(self.ssl)
        ERR_clear_error()
    }

    /// Moves all pending ciphertext into one buffer from `allocator`, or returns nil if there is none.
    func takeOutput(allocator: ByteBufferAllocator) -> ByteBuffer? {
        let pending = Int(BIO_ctrl_pending(self.outbound))
        guard pending > 0 else { return nil }
        var buffer = allocator.buffer(capacity: pending)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { space in
            var read = 0
            // Reading what BIO_ctrl_pending reported from a memory BIO cannot fail.
            guard BIO_read_ex(self.outbound, space.baseAddress, pending, &read) == 1, read == pending else {
                preconditionFailure("memory BIO returned less than it holds")
            }
            return read
        }
        return buffer
    }

    /// The protocol the server selected with ALPN, if any.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// "TLSv1.2" or "TLSv1.3".
    var protocolVersion: String {
        String(cString: SSL_get_version(self.ssl))
    }

    /// The peer certificate's subject in RFC 2253 form, if the peer sent one.
    var peerCertificateSubject: String? {
        guard let certificate = SSL_get1_peer_certificate(self.ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, kindred_XN_FLAG_RFC2253()) >= 0 else {
            ERR_clear_error()
            return nil
        }
        return memoryBIOString(bio)
    }

    /// Whether the peer sent a certificate and it verified against the trust roots.
    var peerCertificateVerified: Bool {
        guard let certificate = SSL_get1_peer_certificate(self.ssl) else { return false }
        X509_free(certificate)
        return SSL_get_verify_result(self.ssl) == X509_V_OK
    }

    private func error(_ code: OpenSSLError.Code, _ message: String) -> OpenSSLError {
        var error = OpenSSLError.fromErrorQueue(code, message)
        let verification = SSL_get_verify_result(self.ssl)
        if verification != X509_V_OK {
            error.verificationFailure = String(cString: X509_verify_cert_error_string(verification))
        }
        return error
    }
}
