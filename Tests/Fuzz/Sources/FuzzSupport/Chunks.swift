/// `stream` cut into the pieces a plan says: piece `i` is `1 + plan[i % plan.count]` bytes (the last one what is
/// left); an empty plan gives the whole stream at once. An empty stream gives one empty piece, so that a parser fed
/// piece by piece is still asked once.
public func chunks(of stream: [UInt8], plan: [UInt8]) -> [ArraySlice<UInt8>] {
    guard !plan.isEmpty, !stream.isEmpty else { return [stream[...]] }
    var pieces: [ArraySlice<UInt8>] = []
    var offset = 0
    while offset < stream.count {
        let size = min(stream.count - offset, 1 + Int(plan[pieces.count % plan.count]))
        pieces.append(stream[offset..<(offset + size)])
        offset += size
    }
    return pieces
}
