#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where output goes: results on stdout (for people and scripts), errors, notes and prompts on stderr.
enum Console {
    /// One line on stdout, flushed at once: into a pipe too, live output (`kindred chat`, the deck's cards before
    /// its prompt) must not wait in stdio's buffer until the command ends.
    static func out(_ line: String) {
        print(line)
        fflush(nil)  // all output streams: stdout is the only buffered one
    }

    static func error(_ line: String) {
        self.writeStandardError(line + "\n")
    }

    static func prompt(_ text: String) {
        self.writeStandardError(text)
    }

    /// Unbuffered, so prompts appear before the read and errors interleave correctly with stdout.
    private static func writeStandardError(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
