/// A name in the schema's byte pool (UTF-8), which lives as long as the process: copying one costs
/// no reference counting on the converters' paths.
struct SchemaName {
    let bytes: UnsafeRawBufferPointer

    /// For error messages.
    var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether the name is exactly `other`.
    @inline(__always)
    func equals(_ other: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == other.count else { return false }
        for index in 0..<bytes.count where bytes[index] != other[index] { return false }
        return true
    }
}
