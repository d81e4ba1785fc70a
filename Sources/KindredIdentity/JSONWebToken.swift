import Foundation
import KindredOpenSSL

/// A JWS in compact form (`header.payload.signature`), split and decoded but not yet trusted.
struct CompactJWS {
    struct Header: Decodable {
        let alg: String
        let kid: String?
        let typ: String?
    }

    let header: Header
    let payload: Data
    /// The bytes the signature covers: ASCII `base64url(header) "." base64url(payload)`.
    let signingInput: [UInt8]
    let signature: [UInt8]

    /// Largest token accepted, in bytes; a JWT is small, a huge one is an attack on the parser.
    static let maxLength = 8192

    init(_ token: String) throws(TokenError) {
        guard token.utf8.count <= Self.maxLength else { throw TokenError(.malformed) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(parts[0]),
            let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw TokenError(.malformed) }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)) else {
            throw TokenError(.malformed)
        }
        self.header = header
        self.payload = Data(payloadBytes)
        self.signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        self.signature = signature
    }

    /// Encodes and signs a token.
    static func encode(header: [String: String], claims: some Encodable, sign: ([UInt8]) throws -> [UInt8]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let headerPart = Base64URL.encode(try encoder.encode(header))
        let payloadPart = Base64URL.encode(try encoder.encode(claims))
        let signingInput = "\(headerPart).\(payloadPart)"
        let signature = try sign(Array(signingInput.utf8))
        return "\(signingInput).\(Base64URL.encode(signature))"
    }
}

/// Why a token was refused. The description is safe to return to a caller (it never echoes the token).
public struct TokenError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        private enum Value: Hashable, Sendable {
            case malformed, unsupportedAlgorithm, unknownKey, badSignature, expired, notYetValid, wrongIssuer
            case wrongAudience, missingClaim, wrongNonce
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        public static let malformed = Code(.malformed)
        public static let unsupportedAlgorithm = Code(.unsupportedAlgorithm)
        public static let unknownKey = Code(.unknownKey)
        public static let badSignature = Code(.badSignature)
        public static let expired = Code(.expired)
        public static let notYetValid = Code(.notYetValid)
        public static let wrongIssuer = Code(.wrongIssuer)
        public static let wrongAudience = Code(.wrongAudience)
        public static let missingClaim = Code(.missingClaim)
        public static let wrongNonce = Code(.wrongNonce)

        var text: String {
            switch self.value {
            case .malformed: "the token is malformed"
            case .unsupportedAlgorithm: "the token's algorithm is not accepted"
            case .unknownKey: "the token was signed with an unknown key"
            case .badSignature: "the token's signature is invalid"
            case .expired: "the token has expired"
            case .notYetValid: "the token is not valid yet"
            case .wrongIssuer: "the token has the wrong issuer"
            case .wrongAudience: "the token is not meant for this audience"
            case .missingClaim: "the token lacks a required claim"
            case .wrongNonce: "the token's nonce does not match"
            }
        }
    }

    public let code: Code
    public init(_ code: Code) { self.code = code }
    public var description: String { self.code.text }
}
