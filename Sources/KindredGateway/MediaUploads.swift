import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredMediaURL
import KindredOpenSSL
import KindredProto
import KindredProtoJSON
import KindredServiceKit
import NIOConcurrencyHelpers
import NIOHTTP1

/// Uploads by URL on the media port: a `PUT` of a photo's bytes to a URL from CreateUploadUrl
/// (`MediaURLSigner.UploadPath`, signed by the profile service). The head is judged before a body byte is read:
/// 403 for a bad or expired signature, 413 for a `Content-Length` over the cap, 429 over the member's or the
/// address's rate, 503 when the port already buffers `maxBufferedUploadBytes`. A chunked body is cut at the cap
/// (413). The whole body then goes to profile's UploadPhoto as the gateway, with the URL in the header, so the
/// profile service checks the signature again and applies UploadPhoto's image checks, renditions, photo cap and
/// upload rate; the upload id is the photo's idempotency key and the body's SHA-256 goes along, so a retried PUT
/// answers the stored photo and a different body on a used URL 409. Answers: 200 with the
/// `UploadPhotoResponse` as proto3 JSON (`photo` and `photos`), errors as Connect error JSON with the gRPC code
/// and Kindred's `ErrorDetail`, at Connect's HTTP status for the code.
extension MediaServer {
    /// The largest body an upload URL takes: UploadPhoto's cap.
    static let maxUploadBytes = Int(ProfileAPI.maxUploadBytes)
    /// Bytes of upload bodies the port holds at once (a body is read whole before it goes on, so that its SHA-256
    /// can decide a retry): about eight full-size photos. Past it a new PUT is answered 503 with Retry-After.
    static let maxBufferedUploadBytes = 128 << 20

    /// What a PUT's head decides.
    enum UploadAdmission {
        /// Read the body; `reserved` bytes of the port's buffer budget are held for it until `releaseUpload`.
        case accept(reserved: Int)
        case refuse(Answer)
    }

    /// Judges a PUT's head: signature and expiry, declared size, rate limits, buffer budget.
    func admitUpload(target: String, contentLength: Int?, clientAddress: String, origin: String?) -> UploadAdmission {
        let now = Int64(Date().timeIntervalSince1970)
        guard let (path, _) = self.signer.verifyUpload(target, now: now) else {
            return .refuse(self.uploadRefusal(403, "invalid or expired upload URL", origin: origin))
        }
        if let contentLength, contentLength > Self.maxUploadBytes {
            return .refuse(self.uploadRefusal(413, "the photo is larger than \(Self.maxUploadBytes) bytes", origin: origin))
        }
        do {
            try self.gateway.take(self.gateway.clientLimiter, clientAddress, bucket: "client")
            try self.gateway.take(self.gateway.accountLimiter, path.userID, bucket: "account")
        } catch {
            return .refuse(self.uploadError(error, origin: origin))
        }
        let reserved = contentLength ?? Self.maxUploadBytes
        let admitted = self.uploadBytesBuffered.withLockedValue { buffered -> Bool in
            guard buffered + reserved <= Self.maxBufferedUploadBytes else { return false }
            buffered += reserved
            return true
        }
        guard admitted else {
            var answer = self.uploadRefusal(503, "too many uploads at once; retry shortly", origin: origin)
            answer.headers.append(("retry-after", "1"))
            return .refuse(answer)
        }
        return .accept(reserved: reserved)
    }

    /// Gives back the buffer budget an accepted PUT held.
    func releaseUpload(reserved: Int) {
        self.uploadBytesBuffered.withLockedValue { $0 -= reserved }
    }

    /// Stores the photo of an accepted PUT through profile's UploadPhoto.
    func upload(target: String, contentType: String, body: [UInt8], clientAddress: String, origin: String?) async
        -> Answer
    {
        guard let profile = self.gateway.profile, let tokens = self.gateway.serviceTokens else {
            return self.uploadRefusal(503, "the profile service is not reachable", origin: origin)
        }
        let response: ProfileApi.UploadPhotoResponse
        do {
            var metadata = try await tokens.metadata()
            metadata.add("x-kindred-client-ip", clientAddress)
            response = try await profile.client.clientStreaming(
                ProfileApi.ProfileService.Method.uploadPhoto, metadata: metadata,
                options: CallOptions(timeout: ProfileAPI.uploadTimeout)
            ) { writer in
                var header = ProfileApi.UploadPhotoRequest()
                header.part = .header(
                    .with {
                        $0.contentType = contentType
                        $0.totalSizeBytes = Int64(body.count)
                        $0.sha256 = SHA256.hash(body)
                        $0.uploadUrl = target
                    })
                try await writer.write(header)
                var offset = 0
                while offset < body.count {
                    let end = min(offset + ProfileAPI.chunkBytes, body.count)
                    do {
                        try await writer.write(.with { $0.part = .chunk(Array(body[offset..<end])) })
                    } catch {
                        break  // answered early (a retry, or a refusal): its status says which
                    }
                    offset = end
                }
            }
            self.gateway.metrics.downstreamFinished(service: "profile", code: .ok)
        } catch {
            self.gateway.metrics.downstreamFinished(service: "profile", code: (error as? RPCError)?.code ?? .unavailable)
            return self.uploadError(
                GatewayErrors.fromDownstream(error, service: "profile", logger: self.gateway.logger), origin: origin)
        }
        do {
            let answer = Api.UploadPhotoResponse(response)
            let json = try ProtoJSON.json(fromBinary: try answer.serializedBytes(), of: Api.UploadPhotoResponse.self)
            self.gateway.metrics.mediaRequest(status: 200)
            return Answer(
                status: .ok, headers: [("content-type", "application/json")] + self.corsHeaders(origin: origin),
                body: json)
        } catch {
            self.gateway.logger.error("upload answer not encodable", metadata: ["error.type": "\(type(of: error))"])
            return self.uploadRefusal(500, "the answer could not be encoded", origin: origin)
        }
    }

    /// An error as Connect error JSON at Connect's HTTP status for its code, with its `ErrorDetail` and, for
    /// rate limits, `Retry-After`.
    func uploadError(_ error: RPCError, origin: String?) -> Answer {
        var details: [ConnectError.Detail] = []
        var headers = [("content-type", "application/json")] + self.corsHeaders(origin: origin)
        if let detail = error.errorDetail, let bytes = try? detail.serializedBytes() {
            let debug = try? ProtoJSON.json(fromBinary: bytes, of: Kindred.Common.V1.ErrorDetail.self)
            details.append(ConnectError.Detail(type: Kindred.Common.V1.ErrorDetail.protoMessageName, value: bytes, debugJSON: debug))
            if detail.retryAfterMs > 0 { headers.append(("retry-after", "\((detail.retryAfterMs + 999) / 1000)")) }
        }
        let status = ConnectError.httpStatus(error.code)
        self.gateway.metrics.mediaRequest(status: status)
        return Answer(
            status: HTTPResponseStatus(statusCode: status), headers: headers, body: ConnectError.json(error, details: details))
    }

    /// A refusal by the media port itself, as Connect error JSON.
    func uploadRefusal(_ status: Int, _ message: String, origin: String?) -> Answer {
        let code: StatusCode =
            switch status {
            case 403: .permissionDenied
            case 413: .resourceExhausted
            case 503: .unavailable
            default: .internalError
            }
        self.gateway.metrics.mediaRequest(status: status)
        return Answer(
            status: HTTPResponseStatus(statusCode: status),
            headers: [("content-type", "application/json")] + self.corsHeaders(origin: origin),
            body: ConnectError.json(RPCError(code, message), details: []))
    }

    /// The answer to a CORS preflight of an upload URL: 204 with the CORS headers for an allowed origin asking for
    /// PUT, else 403 without them.
    func uploadPreflight(origin: String?, requestMethod: String?) -> Answer {
        let allowed = self.cors.allowedPreflight(
            origin: origin, requestMethod: requestMethod, methods: ["PUT"], requestHeaders: "content-type")
        guard let allowed else { return Answer(status: .forbidden, headers: [("vary", "origin")]) }
        return Answer(status: .noContent, headers: allowed.map { ($0.name, $0.value) })
    }

    /// CORS headers of an upload answer (the origin only when allowed, nothing exposed; `vary` always).
    func corsHeaders(origin: String?) -> [(String, String)] {
        self.cors.responseHeaders(origin: origin, exposing: nil).map { ($0.name, $0.value) }
    }
}
