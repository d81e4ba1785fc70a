import KindredProto

extension Kindred.Common.V1.GetUserFootprintResponse {
    /// A service's answer to GetUserFootprint: one count per kind of data, in the order given, zeros included.
    /// The request and the answer are the same messages for every service (common.v1), so the gateway asks them
    /// all in one loop.
    public init(counts: [(String, Int64)]) {
        self.init()
        self.counts = counts.map { kind, rows in
            var count = Kindred.Common.V1.DataCount()
            count.kind = kind
            count.rows = rows
            return count
        }
    }
}
