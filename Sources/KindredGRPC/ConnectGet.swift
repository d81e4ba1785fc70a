import KindredProtobuf
import NIOCore

/// Connect's unary GET (connectrpc.com/docs/protocol, "Unary-Get-Request"): a side-effect-free unary call as
/// `GET /<service>/<method>?connect=v1&encoding=json|proto[&base64=1][&compression=…]&message=<message>`, so that
/// browsers, CDNs and HTTP caches can treat it as an ordinary read. The message is percent-encoded in the query
/// (with `base64=1`, base64url of it, padding optional); the answer is Connect unary's, in the query's encoding.
/// Only methods in `WebProtocols.getMethods` (marked `option idempotency_level = NO_SIDE_EFFECTS;` in the protos)
/// take GET: any other method answers 405, as a GET must never change anything.
enum ConnectGet {
    /// The query's parameters (the last value of each), or nil for a malformed escape.
    struct Query: Equatable {
        var connect: String?
        var encoding: String?
        var base64 = false
        var compression: String?
        var message: [UInt8]?

        init?(_ text: Substring) {
            for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = Self.unescape(parts[0]) else { return nil }
                guard let value = parts.count == 2 ? Self.unescape(parts[1]) : [] else { return nil }
                switch String(decoding: name, as: UTF8.self) {
                case "connect": self.connect = String(decoding: value, as: UTF8.self)
                case "encoding": self.encoding = String(decoding: value, as: UTF8.self)
                case "base64": self.base64 = value == Array("1".utf8)
                case "compression": self.compression = String(decoding: value, as: UTF8.self)
                case "message": self.message = value
                default: continue  // unknown parameters (cache busters) are ignored
                }
            }
        }

        /// Form decoding, as URL query parsers do: `%XX` escapes and `+` as a space; nil for a malformed escape.
        static func unescape(_ text: Substring) -> [UInt8]? {
            var out: [UInt8] = []
            out.reserveCapacity(text.utf8.count)
            var iterator = text.utf8.makeIterator()
            while let byte = iterator.next() {
                switch byte {
                case UInt8(ascii: "%"):
                    guard let high = iterator.next().flatMap(Self.hex), let low = iterator.next().flatMap(Self.hex)
                    else { return nil }
                    out.append(high << 4 | low)
                case UInt8(ascii: "+"): out.append(UInt8(ascii: " "))
                default: out.append(byte)
                }
            }
            return out
        }

        private static func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }

    /// What a GET opens: a call with its request message, or a refusal.
    static func decide(
        path target: String,
        router: GRPCRouter,
        web: WebProtocols,
        connectTimeout: String?,
        origin: String?
    ) -> CallOpening {
        let pieces = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(pieces[0])
        guard let query = Query(pieces.count == 2 ? pieces[1] : "") else {
            return .http(status: "400", message: "Malformed query")
        }
        // A method that is not side-effect free never takes GET, whatever the query says.
        let handler = router.handlers[path]
        if let handler, !(web.getMethods.contains(path) && handler.singleRequest && handler.singleResponse) {
            return .http(status: "405", message: "This method takes POST only")
        }
        let codec: WireProtocol.ConnectCodec
        switch query.encoding {
        case "proto": codec = .proto
        case "json" where web.json != nil: codec = .json
        default: return .http(status: "415", message: "Unsupported encoding: use encoding=json or encoding=proto")
        }
        let wire = WireProtocol.connectUnary(codec)
        let response = WireResponse(wire: wire, extraHeaders: web.cors?.responseHeaders(origin: origin) ?? [], web: web)
        if let version = query.connect, version != "v1" {
            return .refuse(response, RPCError(.invalidArgument, "Unsupported connect protocol version"), unknownMethod: false)
        }
        guard let handler else {
            return .refuse(response, RPCError(.unimplemented, "Unknown method \(path)"), unknownMethod: true)
        }
        if let compression = query.compression, compression != "identity" {
            var error = RPCError(.unimplemented, "Compression \(compression) is not supported")
            error.metadata.add("accept-encoding", "identity")
            return .refuse(response, error, unknownMethod: false)
        }
        var message = query.message ?? []
        if query.base64 {
            // base64url (RFC 4648 §5), padded or not.
            let standard = message.map { byte -> UInt8 in
                switch byte {
                case UInt8(ascii: "-"): UInt8(ascii: "+")
                case UInt8(ascii: "_"): UInt8(ascii: "/")
                default: byte
                }
            }
            guard let decoded = Base64.decode(String(decoding: standard, as: UTF8.self)) else {
                return .refuse(response, RPCError(.invalidArgument, "The message is not base64url"), unknownMethod: false)
            }
            message = decoded
        }
        var deadline: NIODeadline?
        if let connectTimeout {
            guard let duration = ConnectError.parseTimeout(connectTimeout) else {
                return .refuse(response, RPCError(.invalidArgument, "Malformed connect-timeout-ms"), unknownMethod: false)
            }
            deadline = .now() + TimeAmount(duration)
        }
        return .call(handler: handler, path: path, response: response, deadline: deadline, message: message)
    }
}
