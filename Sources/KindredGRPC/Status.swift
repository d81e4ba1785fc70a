/// A gRPC status code (https://grpc.github.io/grpc/core/md_doc_statuscodes.html).
public struct StatusCode: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init?(rawValue: Int) {
        guard (0...16).contains(rawValue) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: Int) { self.rawValue = rawValue }

    public static let ok = StatusCode(0)
    public static let cancelled = StatusCode(1)
    public static let unknown = StatusCode(2)
    public static let invalidArgument = StatusCode(3)
    public static let deadlineExceeded = StatusCode(4)
    public static let notFound = StatusCode(5)
    public static let alreadyExists = StatusCode(6)
    public static let permissionDenied = StatusCode(7)
    public static let resourceExhausted = StatusCode(8)
    public static let failedPrecondition = StatusCode(9)
    public static let aborted = StatusCode(10)
    public static let outOfRange = StatusCode(11)
    public static let unimplemented = StatusCode(12)
    public static let internalError = StatusCode(13)
    public static let unavailable = StatusCode(14)
    public static let dataLoss = StatusCode(15)
    public static let unauthenticated = StatusCode(16)

    private static let names = [
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
        "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
        "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    ]
    public var description: String { Self.names[self.rawValue] }

    /// The code a client reports for an HTTP status that is not 200 (gRPC's http-grpc-status-mapping.md).
    static func fromHTTPStatus(_ status: Int) -> StatusCode {
        switch status {
        case 400: .internalError
        case 401: .unauthenticated
        case 403: .permissionDenied
        case 404: .unimplemented
        case 429, 502, 503, 504: .unavailable
        default: .unknown
        }
    }
}

/// The error a handler throws, or a call fails with: a status code, a message safe to show the caller,
/// trailing metadata and optional `grpc-status-details-bin` bytes (a serialized google.rpc.Status).
public struct RPCError: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: StatusCode
    public var message: String
    public var metadata: Metadata
    /// Passed through unchanged as `grpc-status-details-bin`.
    public var details: [UInt8]?

    public init(_ code: StatusCode, _ message: String = "", metadata: Metadata = [:], details: [UInt8]? = nil) {
        self.code = code
        self.message = message
        self.metadata = metadata
        self.details = details
    }

    public var description: String {
        self.message.isEmpty ? "\(self.code)" : "\(self.code): \(self.message)"
    }
}

/// Errors that know their gRPC status. The server maps every error a handler throws in one place: an
/// `RPCError` as is, an `RPCErrorConvertible` through `rpcError`, cancellation as CANCELLED, anything else as
/// UNKNOWN with a generic message (the detail goes to the log, never to the caller).
public protocol RPCErrorConvertible: Error {
    var rpcError: RPCError { get }
}

extension RPCError {
    static func from(_ error: any Error) -> RPCError {
        switch error {
        case let error as RPCError: error
        case let error as any RPCErrorConvertible: error.rpcError
        case is CancellationError: RPCError(.cancelled, "The call was cancelled")
        default: RPCError(.unknown, "The server failed to process the call")
        }
    }
}
