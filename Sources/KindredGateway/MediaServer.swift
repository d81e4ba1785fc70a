import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredMediaURL
import KindredProto
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The gateway's media port: plain HTTP/1.1 GET of signed photo URLs (`MediaURLSigner`), so phones' stock image
/// loaders and CDNs fetch renditions without tokens, cookies or headers. The gateway checks the signature and the
/// expiry, reads the bytes from the profile service's GetPhoto with its service token, and answers with a strong
/// `ETag` (`If-None-Match` → 304) and `Cache-Control: public, max-age=…, immutable` (a URL names one version).
///
/// 404 for an unknown, deleted or replaced photo (a URL of an older version), 403 for a bad or expired signature,
/// 405 for methods other than GET/HEAD, 413 for request bodies, 503 when the profile service cannot answer.
/// Slow or silent connections are closed and open ones capped (`GatewayConfiguration.mediaLimits`).
/// With a web root it also serves the web app under `/app/` (`WebAppFiles`), and it takes photo uploads by URL
/// (`PUT /upload/v1/…`, see `MediaUploads.swift`), with CORS for the gateway's allowed origins.
final class MediaServer: Sendable {
    let host: String
    let port: Int
    let limits: HTTP1Limits
    let signer: MediaURLSigner
    let gateway: Gateway
    let webApp: WebAppFiles?
    /// Origins whose pages may PUT to upload URLs (the gateway port's allow-list).
    let cors: CORSPolicy
    /// Bytes of upload bodies reserved by PUTs being read or stored (`maxBufferedUploadBytes`).
    let uploadBytesBuffered = NIOLockedValueBox(0)
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    init(
        host: String, port: Int, limits: HTTP1Limits, signer: MediaURLSigner, gateway: Gateway,
        webApp: WebAppFiles? = nil, cors: CORSPolicy = CORSPolicy(allowedOrigins: [])
    ) {
        self.host = host
        self.port = port
        self.limits = limits
        self.signer = signer
        self.gateway = gateway
        self.webApp = webApp
        self.cors = cors
    }

    /// Binds the port and serves until the task is cancelled.
    func run() async throws {
        let server = self
        let channel = try await HTTP1Port.bind(
            host: self.host,
            port: self.port,
            limits: self.limits,
            metrics: self.gateway.metrics.mediaPort
        ) { MediaHTTPHandler(server: server) }
        self.channel.withLockedValue { $0 = channel }
        self.gateway.logger.info("media port listening", metadata: ["address": "\(channel.localAddress!)"])
        do {
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        } catch {}
        try? await channel.close()
    }

    struct Answer: Sendable {
        var status: HTTPResponseStatus
        var headers: [(String, String)] = []
        var body: [UInt8] = []
    }

    /// The answer to one GET/HEAD of `target` (path and query).
    func answer(target: String, ifNoneMatch: String?) async -> Answer {
        let now = Int64(Date().timeIntervalSince1970)
        guard let (path, expires) = self.signer.verify(target, now: now) else {
            self.gateway.metrics.mediaRequest(status: 403)
            return Answer(status: .forbidden, body: Array("invalid or expired link\n".utf8))
        }
        guard let profile = self.gateway.profile, let tokens = self.gateway.serviceTokens else {
            return Answer(status: .serviceUnavailable)
        }
        var request = Kindred.Profile.V1.GetPhotoRequest()
        request.photoId = path.photoID
        request.variant = Kindred.Common.V1.PhotoVariant(rawValue: path.variant)
        request.format = path.format
        if let tag = ifNoneMatch { request.ifNoneMatch = tag.trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) }
        let response: Kindred.Profile.V1.GetPhotoResponse
        do {
            response = try await profile.client.unary(
                Kindred.Profile.V1.ProfileService.Method.getPhoto, request, metadata: try await tokens.metadata(),
                options: CallOptions(timeout: profile.timeout))
        } catch let error as RPCError where error.code == .notFound || error.code == .invalidArgument {
            self.gateway.metrics.mediaRequest(status: 404)
            return Answer(status: .notFound, body: Array("not found\n".utf8))
        } catch {
            self.gateway.logger.warning("media fetch failed", metadata: ["error.type": "\(type(of: error))"])
            self.gateway.metrics.mediaRequest(status: 503)
            return Answer(status: .serviceUnavailable)
        }
        guard response.version == path.version else {
            self.gateway.metrics.mediaRequest(status: 404)
            return Answer(status: .notFound, body: Array("not found\n".utf8))
        }
        let maxAge = max(0, min(expires - now, Int64(response.cacheMaxAgeSeconds)))
        var answer = Answer(status: response.notModified ? .notModified : .ok)
        answer.headers = [
            ("etag", "\"\(response.etag)\""), ("cache-control", "public, max-age=\(maxAge), immutable"),
        ]
        if !response.notModified {
            answer.headers.append(("content-type", response.contentType))
            answer.body = response.data
        }
        self.gateway.metrics.mediaRequest(status: Int(answer.status.code))
        return answer
    }
}

/// One request at a time per connection (NIO's pipelining handler holds the next one until this one's end).
private final class MediaHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The request being read.
    private enum Request {
        case idle
        /// A GET, HEAD, OPTIONS or a method refused at its end; a body is refused (413).
        case plain(HTTPRequestHead, hasBody: Bool)
        /// An admitted upload PUT: its body so far, and the buffer budget it holds.
        case upload(HTTPRequestHead, body: ByteBuffer, reserved: Int, clientAddress: String)
        /// Answered before its end (refused upload): the rest is dropped while the connection closes.
        case answered
    }

    private let server: MediaServer
    private var request = Request.idle

    init(server: MediaServer) {
        self.server = server
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let channel = context.channel
        switch (self.unwrapInboundIn(data), self.request) {
        case (_, .answered):
            break  // the connection's output is closed: nothing more is read or answered
        case (.head(let head), _):
            self.request = .plain(head, hasBody: false)
            guard head.method == .PUT, MediaURLSigner.UploadPath.owns(head.uri) else { return }
            let address = self.clientAddress(head, channel)
            let length = head.headers.first(name: "content-length").flatMap { Int($0) }
            switch self.server.admitUpload(
                target: head.uri, contentLength: length, clientAddress: address,
                origin: head.headers.first(name: "origin"))
            {
            case .accept(let reserved):
                self.request = .upload(
                    head, body: channel.allocator.buffer(capacity: min(length ?? 0, MediaServer.maxUploadBytes)),
                    reserved: reserved, clientAddress: address)
                if head.headers.first(name: "expect")?.lowercased() == "100-continue" {
                    let interim = HTTPResponseHead(version: head.version, status: .continue)
                    context.writeAndFlush(self.wrapOutboundOut(.head(interim)), promise: nil)
                }
            case .refuse(let answer):
                self.request = .answered
                writeMedia(answer, head: head, to: channel, requestComplete: false)
            }
        case (.body, .plain(let head, _)):
            self.request = .plain(head, hasBody: true)
        case (.body(var part), .upload(let head, var body, let reserved, let address)):
            guard body.readableBytes + part.readableBytes <= MediaServer.maxUploadBytes else {
                self.request = .answered
                self.server.releaseUpload(reserved: reserved)
                let answer = self.server.uploadRefusal(
                    413, "the photo is larger than \(MediaServer.maxUploadBytes) bytes",
                    origin: head.headers.first(name: "origin"))
                writeMedia(answer, head: head, to: channel, requestComplete: false)
                return
            }
            self.request = .idle  // drop the buffer's second reference before writing to it
            body.writeBuffer(&part)
            self.request = .upload(head, body: body, reserved: reserved, clientAddress: address)
        case (.body, _):
            break
        case (.end, .plain(let head, let hasBody)):
            self.request = .idle
            self.answer(head, hasBody: hasBody, channel: channel)
        case (.end, .upload(let head, let body, let reserved, let address)):
            self.request = .idle
            let server = self.server
            let bytes = Array(body.readableBytesView)
            let contentType = head.headers.first(name: "content-type") ?? ""
            Task { [server, channel, head] in
                let answer = await server.upload(
                    target: head.uri, contentType: contentType, body: bytes, clientAddress: address,
                    origin: head.headers.first(name: "origin"))
                server.releaseUpload(reserved: reserved)
                writeMedia(answer, head: head, to: channel)
            }
        case (.end, .idle):
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .upload(_, _, let reserved, _) = self.request { self.server.releaseUpload(reserved: reserved) }
        self.request = .idle
        context.fireChannelInactive()
    }

    /// A complete request other than an admitted upload.
    private func answer(_ head: HTTPRequestHead, hasBody: Bool, channel: any Channel) {
        let isUpload = MediaURLSigner.UploadPath.owns(head.uri)
        if isUpload, head.method == .OPTIONS {
            let answer = self.server.uploadPreflight(
                origin: head.headers.first(name: "origin"),
                requestMethod: head.headers.first(name: "access-control-request-method"))
            writeMedia(answer, head: head, to: channel)
        } else if isUpload, head.method != .PUT {
            writeMedia(MediaServer.Answer(status: .methodNotAllowed, headers: [("allow", "PUT, OPTIONS")]), head: head, to: channel)
        } else if head.method != .GET && head.method != .HEAD {
            writeMedia(MediaServer.Answer(status: .methodNotAllowed), head: head, to: channel)
        } else if hasBody {
            writeMedia(MediaServer.Answer(status: .payloadTooLarge), head: head, to: channel)
        } else if let webApp = self.server.webApp, WebAppFiles.owns(head.uri) {
            writeMedia(webApp.answer(target: head.uri, ifNoneMatch: head.headers.first(name: "if-none-match")),
                head: head, to: channel)
        } else {
            let server = self.server
            let target = head.uri
            let tag = head.headers.first(name: "if-none-match")
            Task { [server, channel, head] in
                let answer = await server.answer(target: target, ifNoneMatch: tag)
                writeMedia(answer, head: head, to: channel)
            }
        }
    }

    /// The peer's address, or with a proxy header configured the address the trusted proxies put in it.
    private func clientAddress(_ head: HTTPRequestHead, _ channel: any Channel) -> String {
        self.server.gateway.clientAddress(peer: channel.remoteAddress?.ipAddress ?? "unknown") { head.headers[$0] }
    }
}

/// Writes one answer (from any thread: channel writes hop to its event loop). An answer before the request's
/// end (`requestComplete` false: a refused upload) closes the connection's output only and drops what the client
/// still sends until it closes or the body deadline passes: closing outright with unread bytes would send a
/// reset that can destroy the answer before the client reads it.
private func writeMedia(
    _ answer: MediaServer.Answer, head: HTTPRequestHead, to channel: any Channel, requestComplete: Bool = true
) {
        var headers = HTTPHeaders()
        for (name, value) in answer.headers { headers.add(name: name, value: value) }
        headers.add(name: "content-length", value: "\(answer.body.count)")
        if answer.status != .ok && answer.status != .notModified { headers.add(name: "cache-control", value: "no-store") }
        let keepAlive = head.isKeepAlive && answer.status != .payloadTooLarge && requestComplete
        if !keepAlive { headers.add(name: "connection", value: "close") }
        let response = HTTPResponseHead(version: head.version, status: answer.status, headers: headers)
        channel.write(HTTPServerResponsePart.head(response), promise: nil)
        if head.method != .HEAD, !answer.body.isEmpty {
            channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: answer.body))), promise: nil)
        }
        let done = channel.writeAndFlush(HTTPServerResponsePart.end(nil))
        if !requestComplete {
            done.whenComplete { _ in channel.close(mode: .output, promise: nil) }
        } else if !keepAlive {
            done.whenComplete { _ in channel.close(promise: nil) }
        }
}

extension Gateway {
    /// The media port (signed photo URLs); nil without a media key, a profile address or with the port off.
    var mediaServer: MediaServer? {
        guard let key = self.configuration.mediaURLKey, let listen = self.configuration.mediaListen, self.profile != nil,
            let signer = MediaURLSigner(key: Array(key.utf8))
        else { return nil }
        var webApp: WebAppFiles?
        if let root = self.configuration.webRoot {
            do {
                webApp = try WebAppFiles(
                    root: root, apiURL: self.configuration.webAPIURL, apiPort: self.configuration.endpoint.listen.port)
            } catch {
                self.logger.error("web app folder unreadable; /app/ not served", metadata: ["web.root": "\(root)"])
            }
        }
        return MediaServer(
            host: listen.host, port: listen.port, limits: self.configuration.mediaLimits, signer: signer, gateway: self,
            webApp: webApp,
            cors: CORSPolicy(allowedOrigins: self.configuration.corsOrigins, maxAge: self.configuration.corsMaxAge))
    }
}
