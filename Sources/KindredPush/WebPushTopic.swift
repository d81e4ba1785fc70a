import KindredOpenSSL

/// The `Topic` header (RFC 8030 §5.4): a push with the same topic replaces one the push service still holds. A
/// topic is at most 32 characters of the base64url alphabet, so a collapse key that is not one is hashed into one
/// (SHA-256, first 24 bytes, base64url: 32 characters), the same key always giving the same topic.
enum WebPushTopic {
    static func from(_ collapseKey: String) -> String {
        let fits = !collapseKey.isEmpty && collapseKey.utf8.count <= 32 && collapseKey.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: "_")
        }
        return fits ? collapseKey : Base64URL.encode(SHA256.hash(collapseKey.utf8).prefix(24))
    }
}
