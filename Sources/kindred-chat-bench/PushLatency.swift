import ArgumentParser
import Foundation
import KindredGRPC
import KindredProto
import Logging
import NIOConcurrencyHelpers

extension ChatBench {
    /// Push mode: the way from a message to the recipient's phone when the app is closed. The second member of every
    /// pair registers an APNs device at notify and opens no Subscribe stream, so each message is pushed; the first
    /// sends at `rate` for `duration` seconds (open loop), pairs taken in turn, so a thread sees one message every
    /// pairs / rate seconds. Each answered message is written to `sends` as "thread device sent answered" (Unix
    /// seconds: when SendMessage was called and when it answered); the script links it to the push the APNs peer
    /// recorded. Then it waits until the peer's record stops growing and prints notify-server's CPU time per push
    /// and its resident memory over the sending.
    func pushLatency(
        clients: [GRPCClient], tokens: [String], threads: [String], metadata: @escaping @Sendable (Int) -> Metadata
    ) async throws {
        guard !self.sends.isEmpty, !self.record.isEmpty else {
            throw ValidationError("--sends and --record are required in push mode")
        }
        let parts = self.notify.split(separator: ":")
        var configuration = GRPCClientConfiguration(host: String(parts[0]), port: Int(parts[1])!)
        configuration.defaultTimeout = .seconds(30)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let notify = GRPCClient(configuration: configuration, logger: logger)
        let devices = (0..<threads.count).map { pair in
            let hex = String(pair, radix: 16)
            return String(repeating: "0", count: 64 - hex.count) + hex
        }
        for start in stride(from: 0, to: threads.count, by: 50) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for pair in start..<min(start + 50, threads.count) {
                    group.addTask {
                        var request = Kindred.Notify.V1.RegisterDeviceRequest()
                        request.platform = .apns
                        request.token = devices[pair]
                        request.appId = "dev.kindred.app"
                        _ = try await notify.unary(
                            Kindred.Notify.V1.NotifyService.Method.registerDevice, request,
                            metadata: metadata(2 * pair + 1))
                    }
                }
                try await group.waitForAll()
            }
        }
        await notify.close()
        print("devices registered: \(threads.count)")

        let clock = ContinuousClock()
        let interval = Duration.seconds(1) / self.rate
        let total = self.duration * self.rate
        let answered = NIOLockedValueBox([String]())
        let failures = NIOLockedValueBox([String: Int]())
        let recordedBefore = Self.lines(in: self.record)
        let cpuBefore = self.notifyPid.map(Self.cpuTicks(of:)) ?? 0
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                try await clock.sleep(until: start + interval * index)
                let pair = index % threads.count
                let client = clients[pair % clients.count]
                group.addTask {
                    var request = Chat.SendMessageRequest()
                    request.threadId = threads[pair]
                    request.clientMessageId = "p\(index)"
                    request.body = "push bench \(index)"
                    let sentAt = Date().timeIntervalSince1970
                    do {
                        _ = try await client.unary(Method.sendMessage, request, metadata: metadata(2 * pair))
                        let line = "\(threads[pair]) \(devices[pair]) \(sentAt) \(Date().timeIntervalSince1970)"
                        answered.withLockedValue { $0.append(line) }
                    } catch {
                        failures.withLockedValue { $0["\(error)", default: 0] += 1 }
                    }
                }
            }
            try await group.waitForAll()
        }
        let sent = clock.now - start
        let lines = answered.withLockedValue { $0 }
        try (lines.joined(separator: "\n") + "\n").write(toFile: self.sends, atomically: true, encoding: .utf8)
        print(String(
            format: "push: %d pairs, %d msg/s target (%.0f achieved), %d s: %d answered, %d failed", threads.count,
            self.rate, Double(total) / sent.seconds, self.duration, lines.count,
            failures.withLockedValue { $0.values.reduce(0, +) }))
        for (failure, count) in failures.withLockedValue({ $0 }).sorted(by: { $0.value > $1.value }).prefix(5) {
            print("  failed \(count)×: \(failure)")
        }

        // The pushes still on their way: wait until the record has stopped growing for 5 s (at most 3 minutes).
        var (last, stable) = (Self.lines(in: self.record), 0)
        let drainStart = clock.now
        while stable < 10 && clock.now - drainStart < .seconds(180) {
            try await Task.sleep(for: .milliseconds(500))
            let now = Self.lines(in: self.record)
            (last, stable) = (now, now == last ? stable + 1 : 0)
        }
        let pushes = last - recordedBefore
        print(String(format: "pushes recorded by the peer: %d (the last %.1f s after the last send)", pushes,
            (clock.now - drainStart).seconds - 5))
        if let pid = self.notifyPid {
            let ticks = Self.cpuTicks(of: pid) - cpuBefore
            let seconds = Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
            print(String(
                format: "notify-server: %.0f µs CPU per push (%.1f s over %d pushes), RSS %.1f MB (peak %.1f MB)",
                pushes > 0 ? seconds / Double(pushes) * 1e6 : 0, seconds, pushes,
                Self.statusKilobytes("VmRSS", of: pid) / 1000, Self.statusKilobytes("VmHWM", of: pid) / 1000))
        }
    }

    static func lines(in path: String) -> Int {
        guard let data = FileManager.default.contents(atPath: path) else { return 0 }
        return data.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }

    /// User + system CPU time of a process, in clock ticks (/proc/PID/stat fields 14 and 15).
    static func cpuTicks(of pid: Int32) -> Int {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        // Fields after the command's closing parenthesis start at field 3.
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        guard fields.count > 12 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    static func statusKilobytes(_ key: String, of pid: Int32) -> Double {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") } ?? ""
        return Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
