internal import COpenSSL

/// An error from OpenSSL: TLS configuration, a handshake or connection, or a crypto primitive.
///
/// `description` shows a fixed message, the file involved (its path, never its contents), the
/// certificate verification result and OpenSSL's error-queue reasons (library and reason names,
/// e.g. `error:0A000086:SSL routines::certificate verify failed`). It never prints key material,
/// plaintext, passwords or signatures.
public struct OpenSSLError: Error, CustomStringConvertible, Sendable {
    /// What went wrong; a struct around a private enum so that codes can be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case invalidConfiguration
            case certificateFile
            case privateKeyFile
            case trustRootsFile
            case handshakeFailed
            case applicationProtocolNotNegotiated
            case connectionFailed
            case closedDuringHandshake
            case randomFailed
            case invalidKey
            case cryptoFailed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A configuration value OpenSSL rejected (cipher list, ALPN names, missing server name…).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The certificate chain file could not be read or parsed.
        public static let certificateFile = Code(.certificateFile)
        /// The private key file could not be read or parsed, is encrypted, or does not match the certificate.
        public static let privateKeyFile = Code(.privateKeyFile)
        /// The CA file (trust roots) could not be read or parsed.
        public static let trustRootsFile = Code(.trustRootsFile)
        /// The TLS handshake failed (protocol error, alert from the peer, certificate verification).
        public static let handshakeFailed = Code(.handshakeFailed)
        /// The client offered ALPN protocols and the server selected none of them.
        public static let applicationProtocolNotNegotiated = Code(.applicationProtocolNotNegotiated)
        /// A TLS error after the handshake (bad record, alert from the peer).
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection closed before the handshake completed.
        public static let closedDuringHandshake = Code(.closedDuringHandshake)
        /// The CSPRNG failed.
        public static let randomFailed = Code(.randomFailed)
        /// Key bytes, PEM or JWK components that do not form a valid key of the expected type.
        public static let invalidKey = Code(.invalidKey)
        /// A crypto operation failed inside OpenSSL (typically memory allocation).
        public static let cryptoFailed = Code(.cryptoFailed)

        public var description: String {
            switch self.base {
            case .invalidConfiguration: "invalidConfiguration"
            case .certificateFile: "certificateFile"
            case .privateKeyFile: "privateKeyFile"
            case .trustRootsFile: "trustRootsFile"
            case .handshakeFailed: "handshakeFailed"
            case .applicationProtocolNotNegotiated: "applicationProtocolNotNegotiated"
            case .connectionFailed: "connectionFailed"
            case .closedDuringHandshake: "closedDuringHandshake"
            case .randomFailed: "randomFailed"
            case .invalidKey: "invalidKey"
            case .cryptoFailed: "cryptoFailed"
            }
        }
    }

    public var code: Code
    /// A fixed message saying what was being done.
    public var message: String
    /// The path of the file involved, if any.
    public var file: String?
    /// The peer certificate verification result, when verification failed
    /// (e.g. "unable to get local issuer certificate", "hostname mismatch").
    public var verificationFailure: String?
    /// OpenSSL's error queue at the time of the failure, oldest first.
    public var reasons: [String]

    package init(
        code: Code,
        message: String,
        file: String? = nil,
        verificationFailure: String? = nil,
        reasons: [String] = []
    ) {
        self.code = code
        self.message = message
        self.file = file
        self.verificationFailure = verificationFailure
        self.reasons = reasons
    }

    public var description: String {
        var text = "OpenSSLError(\(self.code): \(self.message)"
        if let file = self.file { text += ", file: \(file)" }
        if let failure = self.verificationFailure { text += ", verification: \(failure)" }
        if !self.reasons.isEmpty { text += ", reasons: [\(self.reasons.joined(separator: "; "))]" }
        return text + ")"
    }

    /// An error carrying (and clearing) this thread's OpenSSL error queue.
    static func fromErrorQueue(_ code: Code, _ message: String, file: String? = nil) -> OpenSSLError {
        OpenSSLError(code: code, message: message, file: file, reasons: Self.drainErrorQueue())
    }

    /// Empties the thread's error queue and returns its entries as reason strings.
    ///
    /// `ERR_error_string_n` renders library and reason names only, never the per-error "data"
    /// string (which can hold file contents or user input), so the result is safe to log.
    static func drainErrorQueue() -> [String] {
        var reasons: [String] = []
        var text = [CChar](repeating: 0, count: 256)
        while case let error = ERR_get_error(), error != 0 {
            // Keep the first few: a deep queue repeats itself and would bloat logs.
            guard reasons.count < 8 else { continue }
            ERR_error_string_n(error, &text, text.count)
            reasons.append(text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return reasons
    }
}
