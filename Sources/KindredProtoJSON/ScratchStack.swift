/// A growing stack of plain values that nested messages share (each level pushes its part and pops
/// it when done): a pointer, a count and a capacity, without an array's uniqueness checks. The
/// owner calls `deallocate()`.
struct ScratchStack<Element: BitwiseCopyable> {
    private(set) var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 8)
        base = .allocate(capacity: self.capacity)
    }

    func deallocate() { base.deallocate() }

    @inline(__always)
    subscript(index: Int) -> Element {
        get { base[index] }
        nonmutating set { base[index] = newValue }
    }

    @inline(__always)
    mutating func push(_ element: Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Drops everything from `newCount` on.
    mutating func pop(to newCount: Int) { count = newCount }

    /// The elements in `range`, for sorting in place.
    func slice(_ range: Range<Int>) -> UnsafeMutableBufferPointer<Element> {
        UnsafeMutableBufferPointer(start: base + range.lowerBound, count: range.count)
    }

    private mutating func grow() {
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity *= 2
    }
}
