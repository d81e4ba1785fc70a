import KindredOpenSSL

/// Six-digit email codes, stored as SHA-256(account id || code).
enum EmailCodeSecret {
    static func generate() throws -> String {
        let bytes = try SecureRandom.bytes(count: 4)
        let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
        let digits = String(value)
        return String(repeating: "0", count: 6 - digits.count) + digits
    }

    static func hash(accountID: String, code: String) -> [UInt8] { SHA256.hash(Array((accountID + ":" + code).utf8)) }
}
