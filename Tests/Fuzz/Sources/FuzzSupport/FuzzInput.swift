import CFuzzDriver
#if canImport(Glibc)
    import Glibc
#endif

/// Reads a fuzzer's bytes as choices (a byte, a small integer) followed by a payload, so that one input drives
/// both the shape of a test (which message type, how the bytes are split) and the bytes under test. Reading past
/// the end yields zeros: every input is a valid test.
public struct FuzzInput {
    public let bytes: [UInt8]
    public private(set) var position = 0

    public init(_ start: UnsafePointer<UInt8>?, _ count: Int) {
        self.bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    }

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    public var remaining: Int { self.bytes.count - self.position }

    public mutating func byte() -> UInt8 {
        guard self.position < self.bytes.count else { return 0 }
        defer { self.position += 1 }
        return self.bytes[self.position]
    }

    /// A little-endian 16-bit value.
    public mutating func uint16() -> Int { Int(self.byte()) | Int(self.byte()) << 8 }

    /// At most `count` bytes.
    public mutating func take(_ count: Int) -> [UInt8] {
        let end = min(self.bytes.count, self.position + max(0, count))
        defer { self.position = end }
        return Array(self.bytes[self.position..<end])
    }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] { self.take(self.remaining) }
}

/// Stops the run with a message when a property the target checks does not hold: libFuzzer reports the crash and
/// writes the input that caused it.
public func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    if !condition() {
        fatalError("property broken: \(message())", file: file, line: line)
    }
}

/// Runs libFuzzer with the command line's options on `target` (the `LLVMFuzzerTestOneInput` of the executable).
public func runFuzzer(_ target: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, target))
}
