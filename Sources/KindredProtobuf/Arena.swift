#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A bump allocator that lives for one pack or unpack call.
///
/// protobuf-c wants mutable C structs, `char *` strings and arrays it can walk; building them in an
/// arena makes a pack or unpack call one or two allocations and frees everything at once. The
/// first block is the caller's stack buffer; further blocks are `malloc`ed and chained.
///
/// Allocations made with `allocateRecordingSize` carry a 16-byte header holding their size. protobuf-c
/// allocates exactly `length + 1` bytes for every string it unpacks, so the header gives a string's
/// true length even when it contains U+0000, which `strlen` would cut short.
struct Arena: ~Copyable {
    private var cursor: UnsafeMutableRawPointer
    private var end: UnsafeMutableRawPointer
    /// The most recent malloc'ed block; each block's first word points to the previous one.
    private var blocks: UnsafeMutableRawPointer?
    private var nextBlockSize: Int
    private var totalBytes = 0
    private let limit: Int
    /// Set when an allocation was refused because it would pass `limit`.
    private(set) var exceededLimit = false

    static let headerSize = 16
    private static let headerMagic = 0x6b69_6e64_7265_6421  // "kindred!"
    private static let blockHeaderSize = 16

    /// - Parameters:
    ///   - initial: memory used first, typically from `withUnsafeTemporaryAllocation`.
    ///   - limit: total bytes this arena may hand out; further allocations return `nil`.
    init(initial: UnsafeMutableRawBufferPointer, limit: Int = .max) {
        let base = initial.baseAddress!
        self.cursor = base
        self.end = base + initial.count
        self.nextBlockSize = Swift.max(4096, initial.count * 2)
        self.limit = limit
    }

    /// Places an arena at the start of `memory` that allocates from the rest of it. Deinitialize
    /// the returned pointer to free the arena's heap blocks.
    static func create(in memory: UnsafeMutableRawBufferPointer, limit: Int) -> UnsafeMutablePointer<Arena> {
        let headerSize = (MemoryLayout<Arena>.size + 15) & ~15
        let arena = memory.baseAddress!.bindMemory(to: Arena.self, capacity: 1)
        arena.initialize(
            to: Arena(initial: UnsafeMutableRawBufferPointer(rebasing: memory[headerSize...]), limit: limit)
        )
        return arena
    }

    deinit {
        var block = blocks
        while let current = block {
            block = current.load(as: UnsafeMutableRawPointer?.self)
            free(current)
        }
    }

    /// Returns `byteCount` bytes aligned to `alignment` (a power of two, at most 16), or `nil` past
    /// the limit.
    mutating func allocate(byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer? {
        let misalignment = Int(bitPattern: cursor) & (alignment - 1)
        let padding = misalignment == 0 ? 0 : alignment - misalignment
        if byteCount <= end - cursor - padding {
            let result = cursor + padding
            cursor = result + byteCount
            return result
        }
        return allocateSlow(byteCount: byteCount)
    }

    /// Like `allocate(byteCount:alignment:)` with 16-byte alignment, recording the size in a header
    /// that `recordedSize(of:)` reads back.
    mutating func allocateRecordingSize(byteCount: Int) -> UnsafeMutableRawPointer? {
        guard byteCount <= Int.max - Self.headerSize,
            let header = allocate(byteCount: byteCount + Self.headerSize, alignment: 16)
        else { return nil }
        header.storeBytes(of: byteCount, as: Int.self)
        header.storeBytes(of: Self.headerMagic, toByteOffset: 8, as: Int.self)
        return header + Self.headerSize
    }

    /// The size recorded by `allocateRecordingSize` for `pointer`, or `nil` if the header is not ours.
    static func recordedSize(of pointer: UnsafeRawPointer) -> Int? {
        let header = pointer - headerSize
        guard header.load(fromByteOffset: 8, as: Int.self) == headerMagic else { return nil }
        return header.load(as: Int.self)
    }

    private mutating func allocateSlow(byteCount: Int) -> UnsafeMutableRawPointer? {
        // 16 bytes of slack cover any alignment the caller asks for.
        guard byteCount <= Int.max / 2 - Self.blockHeaderSize - 16 else { return nil }
        let needed = byteCount + Self.blockHeaderSize + 16
        let blockSize = Swift.max(needed, nextBlockSize)
        guard totalBytes <= limit - blockSize else {
            exceededLimit = true
            return nil
        }
        guard let block = malloc(blockSize) else { return nil }
        totalBytes += blockSize
        nextBlockSize = Swift.min(blockSize * 2, 1 << 24)
        block.storeBytes(of: blocks, as: UnsafeMutableRawPointer?.self)
        blocks = block
        // malloc returns 16-byte aligned memory, so the first allocation after the header is too.
        let result = block + Self.blockHeaderSize
        cursor = result + byteCount
        end = block + blockSize
        return result
    }
}
