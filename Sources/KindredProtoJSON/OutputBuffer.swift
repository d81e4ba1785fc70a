/// The growing byte buffer both converters write into: a pointer, a count and a capacity, so that
/// appending a byte is a compare and a store (an array also checks that it is uniquely referenced).
/// The owner calls `deallocate()`.
struct OutputBuffer {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    func deallocate() { base.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// A copy of the contents.
    var array: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    @inline(__always)
    subscript(position: Int) -> UInt8 {
        get { base[position] }
        set { base[position] = newValue }
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        if count == capacity { grow(to: count + 1) }
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        let size = bytes.count
        guard size > 0 else { return }
        if capacity - count < size { grow(to: count + size) }
        (base + count).update(from: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: size)
        count += size
    }

    mutating func append(_ name: SchemaName) { append(name.bytes) }

    mutating func append(_ buffer: OutputBuffer) { append(buffer.bytes) }

    mutating func removeAll() { count = 0 }

    /// Drops everything after the first `newCount` bytes.
    mutating func truncate(to newCount: Int) { count = newCount }

    /// Moves the bytes from `position` on `gap` places to the right, leaving `gap` bytes to fill.
    mutating func openGap(at position: Int, _ gap: Int) {
        if capacity - count < gap { grow(to: count + gap) }
        (base + position + gap).update(from: base + position, count: count - position)
        count += gap
    }

    /// Reverses the bytes from `position` to the end.
    mutating func reverse(from position: Int) {
        var low = position
        var high = count - 1
        while low < high {
            let byte = base[low]
            base[low] = base[high]
            base[high] = byte
            low += 1
            high -= 1
        }
    }

    func elementsEqual(_ text: StaticString) -> Bool {
        bytes.elementsEqual(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private mutating func grow(to needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
