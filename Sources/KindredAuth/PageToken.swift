import KindredOpenSSL

/// Opaque page tokens: base64url(offset || HMAC-SHA256(key, scope || offset)), valid only for the same scope.
enum PageToken {
    static func encode(offset: Int, key: [UInt8], scope: String) -> String {
        let payload = Array(String(offset).utf8)
        let mac = HMACSHA256.authenticationCode(for: Array(scope.utf8) + [0] + payload, key: key)
        return Base64URL.encode(payload + [0] + mac)
    }

    static func decode(_ token: String, key: [UInt8], scope: String) -> Int? {
        guard token.utf8.count <= 256, let bytes = Base64URL.decode(token), let split = bytes.firstIndex(of: 0) else {
            return nil
        }
        let payload = Array(bytes[..<split])
        let mac = Array(bytes[(split + 1)...])
        let expected = HMACSHA256.authenticationCode(for: Array(scope.utf8) + [0] + payload, key: key)
        guard ConstantTime.equals(mac, expected), let offset = Int(String(decoding: payload, as: UTF8.self)),
            offset >= 0
        else { return nil }
        return offset
    }
}
