import KindredPostgres
import KindredProto

/// A stored report.
struct ReportRow: Sendable, Hashable {
    var id: String
    var reporter: String
    var reported: String
    var community: String
    var reason: Int32
    var details: String
    var messageIDs: [String]
    var photoIDs: [String]
    var status: Int32
    var resolution: Int32
    var note: String
    var resolvedBy: String?
    var createdUnixMs: Int64
    var resolvedUnixMs: Int64?
}
