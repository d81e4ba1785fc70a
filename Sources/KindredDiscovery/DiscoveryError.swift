import KindredGRPC
import KindredProto
import KindredServiceKit

/// Every failure the discovery service reports to callers: the kit's ``ServiceError`` with discovery's codes
/// below. Messages are fixed texts: never another user's data.
public typealias DiscoveryError = ServiceError

extension ServiceError.Code {
    /// The viewer has no location yet.
    static let locationRequired = Self(.failedPrecondition, reason: "LOCATION_REQUIRED")
    /// The viewer's own profile is not indexed (incomplete, paused, deactivated).
    static let profileIncomplete = Self(.failedPrecondition, reason: "PROFILE_INCOMPLETE")
    /// A rebuild is already running.
    static let rebuildRunning = Self(.failedPrecondition, reason: "REBUILD_RUNNING")
}

extension ServiceError {
    /// INVALID_ARGUMENT naming one field (`reason` a machine code, also the detail's reason; `hint` a fixed text,
    /// never the value).
    static func invalid(_ field: String, _ reason: String, _ hint: String) -> ServiceError {
        ServiceError(violations: [Self.violation(field, reason, hint)], code: Code(.invalidArgument, reason: reason))
    }
}
