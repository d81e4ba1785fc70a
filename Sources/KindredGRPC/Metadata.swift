import KindredHTTP2
import KindredProtobuf

/// Custom metadata of a call: request headers, response headers or trailers.
///
/// Keys are lower-case ASCII. A key ending in `-bin` carries binary values, base64-encoded on the wire;
/// other values are printable ASCII. Order is kept and keys may repeat.
public struct Metadata: Hashable, Sendable, ExpressibleByDictionaryLiteral, Sequence {
    public typealias Key = String
    public typealias Value = Metadata.Entry

    public enum Entry: Hashable, Sendable {
        case string(String)
        case binary([UInt8])
    }

    public private(set) var entries: [(key: String, value: Entry)] = []

    public init() {}
    public init(dictionaryLiteral elements: (String, Entry)...) {
        for (key, value) in elements { self.add(key, value) }
    }

    public var isEmpty: Bool { self.entries.isEmpty }
    public var count: Int { self.entries.count }

    public mutating func add(_ key: String, _ value: String) {
        self.entries.append((key.lowercased(), .string(value)))
    }

    public mutating func add(_ key: String, binary value: [UInt8]) {
        self.entries.append((key.lowercased(), .binary(value)))
    }

    public mutating func add(_ key: String, _ value: Entry) {
        self.entries.append((key.lowercased(), value))
    }

    /// Sets `key` to `value` alone: removes its other entries, adds this one.
    public mutating func replace(_ key: String, with value: String) {
        let key = key.lowercased()
        self.entries.removeAll { $0.key == key }
        self.entries.append((key, .string(value)))
    }

    /// The first string value for `key`.
    public subscript(key: String) -> String? {
        for entry in self.entries where entry.key == key {
            if case .string(let value) = entry.value { return value }
        }
        return nil
    }

    /// The first binary value for `key` (which should end in `-bin`).
    public func binary(_ key: String) -> [UInt8]? {
        for entry in self.entries where entry.key == key {
            if case .binary(let value) = entry.value { return value }
        }
        return nil
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: Entry)]> {
        self.entries.makeIterator()
    }

    public static func == (lhs: Metadata, rhs: Metadata) -> Bool {
        lhs.entries.elementsEqual(rhs.entries) { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for entry in self.entries {
            hasher.combine(entry.key)
            hasher.combine(entry.value)
        }
    }
}

extension Metadata {
    /// Header names the protocol owns; they never appear as custom metadata.
    static func isReserved(_ name: String) -> Bool {
        // Every call checks each of its headers: the first byte and the length settle most of them, so at most two
        // string compares remain (two different strings compare slowly, by Unicode rules).
        if name.utf8.first == UInt8(ascii: ":") { return true }
        switch name.utf8.count {
        case 2: return name == "te"
        case 4: return name == "host"
        case 7: return name == "upgrade"
        case 10: return name == "connection" || name == "keep-alive"
        case 11: return name == "grpc-status"
        case 12: return name == "content-type" || name == "grpc-timeout" || name == "grpc-message"
        case 13: return name == "grpc-encoding"
        case 14: return name == "content-length"
        case 16: return name == "proxy-connection"
        case 17: return name == "transfer-encoding"
        case 20: return name == "grpc-accept-encoding"
        case 23: return name == "grpc-status-details-bin"
        default: return false
        }
    }

    /// Whether a key names binary values (ends in `-bin`), comparing bytes (`hasSuffix` compares characters).
    static func isBinaryKey(_ key: String) -> Bool {
        let utf8 = key.utf8
        guard utf8.count >= 4 else { return false }
        var index = utf8.index(utf8.endIndex, offsetBy: -4)
        for byte in "-bin".utf8 {
            if utf8[index] != byte { return false }
            index = utf8.index(after: index)
        }
        return true
    }

    /// Builds metadata from received headers, skipping reserved ones. Invalid base64 in a `-bin` value drops
    /// that entry (as grpc-core does) instead of failing the call.
    init(headers: [HTTP2Header]) {
        for header in headers where !Metadata.isReserved(header.name) {
            if Metadata.isBinaryKey(header.name) {
                // Several values may be joined with "," on the wire.
                for part in header.value.split(separator: ",", omittingEmptySubsequences: false) {
                    if let bytes = Base64.decode(part.trimmingSpaces) {
                        self.entries.append((header.name, .binary(bytes)))
                    }
                }
            } else {
                self.entries.append((header.name, .string(header.value)))
            }
        }
    }

    /// Appends this metadata as header fields, skipping reserved names and values that are not valid
    /// header values (so a caller cannot inject protocol headers).
    func appendHeaders(to headers: inout [HTTP2Header]) {
        for entry in self.entries where !Metadata.isReserved(entry.key) && Metadata.isValidKey(entry.key) {
            switch entry.value {
            case .string(let value):
                guard !entry.key.hasSuffix("-bin"), Metadata.isValidASCIIValue(value) else { continue }
                headers.append(HTTP2Header(entry.key, value, indexed: !Metadata.isPerCall(entry.key)))
            case .binary(let value):
                guard entry.key.hasSuffix("-bin") else { continue }
                headers.append(HTTP2Header(entry.key, Base64.encode(value, padding: false)))
            }
        }
    }

    /// Keys whose value is new on every call (the request id, the trace context: W3C `traceparent`, which
    /// KindredTracing sets above this module): sent without HPACK indexing.
    static func isPerCall(_ key: String) -> Bool {
        switch key.utf8.count {
        case 11: key == "traceparent"
        case 12: key == GRPCRequestID.metadataKey
        default: false
        }
    }

    static func isValidKey(_ key: String) -> Bool {
        !key.isEmpty
            && key.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            }
    }

    static func isValidASCIIValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
    }
}

extension Metadata.Entry: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) {
        self = .string(value)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var result = self
        while result.first == " " { result.removeFirst() }
        while result.last == " " { result.removeLast() }
        return result
    }
}
