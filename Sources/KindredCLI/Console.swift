#if canImport(Glibc)
    import Glibc
    private let systemWrite = Glibc.write
#elseif canImport(Darwin)
    import Darwin
    private let systemWrite = Darwin.write
#endif

/// Where output goes: results on stdout (for people and scripts), errors, notes and prompts on stderr.
enum Console {
    /// One line on stdout, written at once (no stdio buffer): into a pipe too, live output (`kindred chat`, the
    /// deck's cards before its prompt) must not wait until the command ends. Not through stdio: flushing it
    /// (`fflush(NULL)`) locks every stream, stdin too, which `readLine` holds while it waits for input, so
    /// `kindred chat`'s live messages, printed while the command waits for the next line typed, hung until it came.
    static func out(_ line: String) {
        self.write(line + "\n", to: STDOUT_FILENO)
    }

    static func error(_ line: String) {
        self.write(line + "\n", to: STDERR_FILENO)
    }

    static func prompt(_ text: String) {
        self.write(text, to: STDERR_FILENO)
    }

    /// Unbuffered, so prompts appear before the read and errors interleave correctly with stdout.
    private static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
