import Foundation
import KindredCLI
import KindredGRPC
import KindredProto
import KindredProtobuf
import Synchronization

/// A fresh directory under the system's temporary folder, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        self.path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("kindred-cli-tests-\(UUID().uuidString)").path
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

/// Mode bits of a file or directory.
func permissions(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

func tokens(
    access: String,
    accessExpires: Int64,
    refresh: String,
    refreshExpires: Int64 = 9_000_000_000_000,
    session: String = "0192aaaa-0000-7000-8000-000000000001"
) -> Kindred.Api.V1.AuthTokens {
    .with {
        $0.accessToken = access
        $0.accessTokenExpiresUnixMs = accessExpires
        $0.refreshToken = refresh
        $0.refreshTokenExpiresUnixMs = refreshExpires
        $0.sessionId = session
    }
}

let testTarget = GatewayTarget(host: "127.0.0.1", port: 50050)

func storedSession(
    access: String = "access-1",
    accessExpires: Int64,
    refresh: String = "refresh-1",
    refreshExpires: Int64 = 9_000_000_000_000
) -> StoredSession {
    StoredSession(
        target: testTarget,
        community: "demo",
        userId: "0192bbbb-0000-7000-8000-000000000002",
        username: "alice",
        tokens: tokens(access: access, accessExpires: accessExpires, refresh: refresh, refreshExpires: refreshExpires)
    )
}

/// An RPCError as the server sends it: the ErrorDetail serialized into the `kindred-error-bin` trailer.
func serverError(
    _ code: StatusCode,
    _ message: String,
    reason: String,
    violations: [(String, String, String)] = [],
    retryAfterMs: Int64 = 0
) throws -> RPCError {
    var detail = Kindred.Common.V1.ErrorDetail()
    detail.reason = reason
    detail.retryAfterMs = retryAfterMs
    detail.fieldViolations = violations.map { field, reason, hint in
        .with {
            $0.field = field
            $0.reason = reason
            $0.hint = hint
        }
    }
    var metadata = Metadata()
    metadata.add("kindred-error-bin", binary: try detail.serializedBytes())
    return RPCError(code, message, metadata: metadata)
}

/// A gateway that answers from a script: each call is recorded with its method path and authorization header,
/// then `answer` gives the response (or throws).
final class ScriptedTransport: GatewayTransport {
    struct Call: Equatable {
        var path: String
        var authorization: String?
    }

    private let state = Mutex<[Call]>([])
    private let answer:
        @Sendable (_ path: String, _ request: any ProtoMessage, _ authorization: String?) throws -> any ProtoMessage

    init(
        answer:
            @escaping @Sendable (_ path: String, _ request: any ProtoMessage, _ authorization: String?) throws ->
            any ProtoMessage
    ) {
        self.answer = answer
    }

    var calls: [Call] { self.state.withLock { $0 } }

    func unary<Request: ProtoMessage, Response: ProtoMessage>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata
    ) async throws -> Response {
        let authorization = metadata["authorization"]
        self.state.withLock { $0.append(Call(path: method.path, authorization: authorization)) }
        let response = try self.answer(method.path, request, authorization)
        guard let response = response as? Response else {
            fatalError("scripted \(type(of: response)) for \(method.path)")
        }
        return response
    }
}

let refreshPath = Kindred.Api.V1.AccountService.Method.refresh.path
let getAccountPath = Kindred.Api.V1.AccountService.Method.getAccount.path
