import Logging
import Synchronization

/// Keeps every log record (trace level and up) so tests can check what is logged.
final class LogRecorder: Sendable {
    private let records = Mutex<[String]>([])

    /// Every record as "message key=value ..." lines.
    var lines: [String] { self.records.withLock { $0 } }

    func logger() -> Logger {
        var logger = Logger(label: "kindred.smtp.test") { _ in RecordingLogHandler(recorder: self) }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ line: String) {
        self.records.withLock { $0.append(line) }
    }
}

private struct RecordingLogHandler: LogHandler {
    let recorder: LogRecorder
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = self.metadata.merging(event.metadata ?? [:]) { $1 }
        let rendered = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        self.recorder.append("\(event.message) \(rendered)")
    }
}
