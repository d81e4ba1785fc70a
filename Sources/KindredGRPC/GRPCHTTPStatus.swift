/// The gRPC status an HTTP status means when a response carries no `grpc-status` of its own (gRPC's
/// doc/http-grpc-status-mapping.md), which is also the status the server puts beside its own plain HTTP refusals
/// (405 for a method other than POST, 415 for a content type it does not serve), so that gRPC clients read the same
/// code whether they look at the HTTP status or at `grpc-status`.
enum GRPCHTTPStatus {
    static func code(_ status: String) -> StatusCode {
        switch status {
        case "400": .internalError
        case "401": .unauthenticated
        case "403": .permissionDenied
        case "404": .unimplemented
        case "429", "502", "503", "504": .unavailable
        default: .unknown
        }
    }
}
