import Foundation
import KindredAuth
import Testing

@Suite("The signing key file")
struct SigningKeyTests {
    @Test("replicas starting together on a fresh data folder all load one key")
    func replicasShareOneKey() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("signing-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/signing-key.pem"
        // Eight starts at once, on threads of their own released together.
        let ids = NSLock()
        nonisolated(unsafe) var seen: [String] = []
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread {
                start.wait()
                let id = (try? SigningKey.loadOrCreate(path: path).keyID) ?? "failed"
                ids.withLock { seen.append(id) }
                done.leave()
            }.start()
        }
        for _ in 0..<8 { start.signal() }
        done.wait()
        #expect(seen.count == 8 && Set(seen).count == 1 && seen[0] != "failed", "\(seen)")
        #expect(try SigningKey.loadOrCreate(path: path).keyID == seen[0])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["signing-key.pem"])
    }
}
