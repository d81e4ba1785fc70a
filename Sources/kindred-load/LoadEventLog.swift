import Foundation
import Synchronization

/// `kindred-load mixed --events-file`: one line per failed call or broken stream, and a progress line every
/// 10 s, each stamped with the wall-clock time, so a soak (Tests/Soak) can tell the errors around a fault from
/// those outside it:
///
///     1764220000.123 error swipe UNAVAILABLE (connection refused)
///     1764220000.456 stream UNAVAILABLE (...)
///     1764220010.000 progress 123456      (calls acknowledged so far, warm-up included)
///     1764220000.000 started               (setup done, the warm-up begins; stdout is not flushed until the end)
final class LoadEventLog: Sendable {
    private let handle: Mutex<FileHandle?>
    let acknowledged = Atomic<Int>(0)

    init(path: String?) throws {
        guard let path else {
            self.handle = Mutex(nil)
            return
        }
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        self.handle = Mutex(FileHandle(forWritingAtPath: path))
    }

    var enabled: Bool { self.handle.withLock { $0 != nil } }

    func error(_ kind: String, _ reason: String) {
        self.write("error \(kind) \(reason)")
    }

    func streamEnded(_ reason: String) {
        self.write("stream \(reason)")
    }

    func started() {
        self.write("started")
    }

    func progress() {
        self.write("progress \(self.acknowledged.load(ordering: .relaxed))")
    }

    private func write(_ text: String) {
        let line = String(format: "%.3f ", Date().timeIntervalSince1970) + text.replacingOccurrences(of: "\n", with: " ") + "\n"
        self.handle.withLock { handle in
            guard let handle else { return }
            handle.write(Data(line.utf8))
        }
    }
}
