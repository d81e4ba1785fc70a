import Foundation
import KindredTestSupport
import KindredGRPC
import KindredProto
import Logging
import Testing

/// The Kindred client against an independent server: Python grpcio (Tests/Interop/python_server.py).
@Suite(.serialized) struct PythonServerInteropTests {
    /// Starts the Python server; it stops when its stdin closes.
    final class PythonServer: @unchecked Sendable {
        let process = Process()
        let input = Pipe()
        let port: Int

        /// `script`, from the repository's root, prints "LISTENING host:port" once it listens.
        init(script: String = "Tests/Interop/python_server.py", arguments: [String] = []) throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let output = Pipe()
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = ["python3", root.appendingPathComponent(script).path] + arguments
            self.process.standardInput = self.input
            self.process.standardOutput = output
            try self.process.run()
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else { break }
                line.append(chunk)
            }
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix("LISTENING "), let port = Int(text.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") else {
                throw RPCError(.unavailable, "\(script) did not start (are grpcio and h2 installed?): \(text)")
            }
            self.port = port
        }

        /// Starts the server on a thread of its own (reading its first line blocks).
        static func start(script: String = "Tests/Interop/python_server.py", arguments: [String] = []) async throws
            -> PythonServer
        {
            try await offThePool { try PythonServer(script: script, arguments: arguments) }
        }

        func stop() async {
            _ = try? await offThePool { self.stopBlocking() }
        }

        private func stopBlocking() {
            try? self.input.fileHandleForWriting.close()
            // SIGKILL too: a child spawned concurrently may hold the stdin pipe open, so EOF may never come, and
            // Foundation starts children with SIGTERM blocked.
            if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
            self.process.waitUntilExit()
        }
    }

    @Test func kindredClientCallsPythonServer() async throws {
        let python = try await PythonServer.start()
        do {
            try await self.callPythonServer(port: python.port)
        } catch {
            await python.stop()
            throw error
        }
        await python.stop()
    }

    private func callPythonServer(port: Int) async throws {
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: port),
            logger: Logger(label: "test")
        )

        let unary = try await client.unaryWithMetadata(
            V1.InteropService.Method.echo,
            echo("from swift"),
            metadata: ["x-echo-initial": "i", "x-echo-trailing": "t", "x-k": "v"]
        )
        #expect(unary.message.message == "from swift")
        #expect(unary.message.seenMetadata.contains("x-k=v"))
        #expect(unary.metadata["x-echo-initial"] == "i")
        #expect(unary.trailers["x-echo-trailing"] == "t")

        var expand = echo("e")
        expand.responseCount = 50
        expand.responseSize = 10_000
        let count = try await client.serverStreaming(V1.InteropService.Method.expand, expand) { stream in
            var count = 0
            for try await response in stream {
                #expect(response.payload.count == 10_000)
                count += 1
            }
            return count
        }
        #expect(count == 50)

        let collected = try await client.clientStreaming(V1.InteropService.Method.collect) { writer in
            for i in 0..<30 { try await writer.write(echo(String(i))) }
        }
        #expect(collected.count == 30)

        let replies = try await client.bidirectionalStreaming(V1.InteropService.Method.chat) { writer, responses in
            for i in 0..<10 { try await writer.write(echo("b\(i)")) }
            writer.finish()
            var replies: [String] = []
            for try await response in responses { replies.append(response.message) }
            return replies
        }
        #expect(replies == (0..<10).map { "b\($0)" })

        var failing = echo()
        failing.failWithCode = Int32(StatusCode.alreadyExists.rawValue)
        failing.failWithMessage = "dupe ✓"
        do {
            _ = try await client.unary(V1.InteropService.Method.echo, failing)
            Issue.record("expected ALREADY_EXISTS")
        } catch let error as RPCError {
            #expect(error.code == .alreadyExists)
            #expect(error.message == "dupe ✓")
        }

        await expectStatus(.deadlineExceeded) {
            _ = try await client.unary(
                V1.InteropService.Method.echo,
                echo(delayMs: 2000),
                options: CallOptions(timeout: .milliseconds(200))
            )
        }
        await client.close()
    }
}
