import Foundation
import Testing

/// The auth lifecycle driven by an independent client: Python grpcio (python/auth_flow.py), reading the
/// verification link from the mail the real SMTP sink received.
@Suite("Python grpcio client")
struct PythonClientTests {
    @Test func signUpVerifySignInRefreshReuseSignOut() async throws {
        try await AuthHarness.with { auth in
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("python/auth_flow.py").path
            let process = Process()
            let output = Pipe()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", script, "127.0.0.1:\(auth.client.configuration.port)", auth.mailDirectory,
                AuthHarness.uniqueEmail(), AuthHarness.uniqueUsername(), auth.community,
            ]
            process.standardOutput = output
            process.standardError = output
            try process.run()
            // Read on a thread of its own: the flow takes a few seconds and must not hold a cooperative thread.
            let text = await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: String(decoding: data, as: UTF8.self))
                }
            }
            #expect(process.terminationStatus == 0, "\(text)")
            #expect(text.contains("FLOW OK"), "\(text)")
        }
    }
}
