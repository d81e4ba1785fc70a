/// Calls `body` with the bytes of `bytes`, without a copy when the sequence has contiguous storage
/// (arrays, native strings' UTF-8 views, `ArraySlice`). The pointer is never nil, even for an empty
/// sequence, because several OpenSSL functions treat a NULL buffer as "no input given".
func withContiguousBytes<Bytes: Sequence<UInt8>, Result>(
    _ bytes: Bytes,
    _ body: (UnsafeRawBufferPointer) throws -> Result
) rethrows -> Result {
    if let result = try bytes.withContiguousStorageIfAvailable({ buffer -> Result in
        if buffer.isEmpty { return try withNonNilEmptyBuffer(body) }
        return try body(UnsafeRawBufferPointer(buffer))
    }) {
        return result
    }
    let copy = Array(bytes)
    if copy.isEmpty { return try withNonNilEmptyBuffer(body) }
    return try copy.withUnsafeBytes(body)
}

private func withNonNilEmptyBuffer<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
    var byte: UInt8 = 0
    return try withUnsafeMutableBytes(of: &byte) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<0])) }
}
