import Foundation

// What async tests of every target share about blocking work. Swift Testing runs a process's tests as tasks on
// the cooperative pool, which has one thread per core: two on our machines. A test that waits for a subprocess,
// reads its pipe, or runs seconds of CPU work (libvips, Python checks) inline holds one of those threads; two such
// tests at once stall every other test of the process, and under load their gRPC deadlines expired before calls
// even started ("Deadline exceeded before the call started"). Such work runs here, on a thread of its own.

/// Runs blocking `body` on a new thread and resumes with its result, leaving the cooperative pool free.
/// `body` must not record test issues (`#expect` needs the test's task); return values and check them after.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A finished child process: its exit status and everything it wrote.
public struct ProcessOutput: Sendable {
    public var status: Int32
    public var standardOutput: Data
    public var standardError: Data

    public var text: String { String(decoding: self.standardOutput, as: UTF8.self) }
    public var errorText: String { String(decoding: self.standardError, as: UTF8.self) }
}

/// Runs `executable` with `arguments` to its end, off the cooperative pool; stdin is `input` (empty by default),
/// stdout and stderr are collected (read concurrently, so a child filling one pipe cannot block on the other).
public func runProcess(
    _ executable: String, _ arguments: [String], directory: String? = nil, input: Data? = nil
) async throws -> ProcessOutput {
    try await offThePool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe()
        let errors = Pipe()
        let stdin = input.map { _ in Pipe() }
        process.standardInput = stdin ?? FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let errorData = LockedData()
        let reader = Thread { errorData.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        if let stdin, let input {  // written on its own thread, so a child answering before it read all cannot block
            Thread {
                stdin.fileHandleForWriting.write(input)
                try? stdin.fileHandleForWriting.close()
            }.start()
        }
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errorData.isSet { usleep(1000) }
        return ProcessOutput(status: process.terminationStatus, standardOutput: outputData, standardError: errorData.value)
    }
}

/// `python3 script arguments...` through `/usr/bin/env`, off the cooperative pool.
public func runPython(_ script: String, _ arguments: [String], input: Data? = nil) async throws -> ProcessOutput {
    try await runProcess("/usr/bin/env", ["python3", script] + arguments, input: input)
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?

    func set(_ data: Data) { self.lock.withLock { self.data = data } }
    var isSet: Bool { self.lock.withLock { self.data != nil } }
    var value: Data { self.lock.withLock { self.data ?? Data() } }
}
