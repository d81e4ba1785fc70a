// kindred-push-bench: the load driver of the APNs and Web Push providers (Tests/Benchmarks/push-apns.sh and
// push-webpush.sh run it against the local peers, Tests/Peers/apns_peer.py and webpush_peer.py). Pushes go through
// APNsProvider or WebPushProvider exactly as the notify service sends them.
//
//   closed loop (default): --concurrency pushes in flight for --duration seconds; pushes/s delivered.
//   open loop (--rate R):  R pushes per second whatever the answers; the latency each push saw.
// Both print p50/p99/max from the send call to its outcome, this process's CPU time per push and its RSS.
import ArgumentParser
import Foundation
import KindredPush
import Logging
import NIOConcurrencyHelpers

@main
struct PushBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "kindred-push-bench", abstract: "Load driver of the APNs and Web Push providers.")

    @Option(help: "The APNs peer's origin, e.g. https://127.0.0.1:8443 (APNs).") var url = ""
    @Option(help: "CA certificate (PEM) of the peer.") var ca: String
    @Option(help: "The .p8 signing key (APNs) or the VAPID key (Web Push).") var key: String
    @Option(help: "A Web Push subscription's endpoint: pushes go through WebPushProvider instead of APNs.")
    var webPushEndpoint = ""
    @Option(help: "The subscription's p256dh (Web Push).") var p256dh = ""
    @Option(help: "The subscription's auth secret (Web Push).") var auth = ""
    @Option(help: "Key id.") var keyID = "KEY1234567"
    @Option(help: "Team id.") var teamID = "TEAM123456"
    @Option(help: "apns-topic.") var topic = "com.kindred.bench"
    @Option(help: "HTTP/2 connections.") var connections = 1
    @Option(help: "Pushes in flight (closed loop).") var concurrency = 200
    @Option(help: "Pushes per second (open loop); 0 for the closed loop.") var rate = 0
    @Option(help: "Seconds of measurement (after 2 s of warm-up).") var duration = 10

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let provider: any PushProvider
        let target: PushTarget
        if self.webPushEndpoint.isEmpty {
            var configuration = APNsConfiguration(keyFile: self.key, keyID: self.keyID, teamID: self.teamID, topic: self.topic)
            configuration.baseURL = self.url
            configuration.trustRootsFile = self.ca
            configuration.connectionCount = self.connections
            configuration.requestTimeout = .seconds(30)
            provider = try APNsProvider(configuration: configuration, logger: logger)
            target = .apns(deviceToken: String(repeating: "ab", count: 32), topic: self.topic)
        } else {
            var configuration = WebPushConfiguration(vapidKeyFile: self.key, subject: "mailto:bench@kindred.test")
            configuration.trustRootsFile = self.ca
            configuration.connectionsPerOrigin = self.connections
            configuration.requestTimeout = .seconds(30)
            provider = try WebPushProvider(configuration: configuration, logger: logger)
            target = .webPush(endpoint: self.webPushEndpoint, p256dh: self.p256dh, auth: self.auth)
        }
        let notification = PushNotification(
            id: UUID().uuidString.lowercased(), title: "New message", body: "New message from Alex",
            collapseKey: "thread-1", badge: 1, data: ["kind": "message"]
        )
        @Sendable func push() async -> (Bool, Double) {
            var copy = notification
            copy.id = UUID().uuidString.lowercased()
            let start = ContinuousClock.now
            let outcome = await provider.send(copy, to: target)
            let elapsed = ContinuousClock.now - start
            let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
            return (outcome == .delivered, milliseconds)
        }

        // Warm-up: connections opened, provider token signed, the peer's caches filled.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(self.concurrency, 4 * self.connections) { group.addTask { _ = await push() } }
        }
        let warmEnd = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < warmEnd { _ = await push() }

        let results = NIOLockedValueBox<(delivered: Int, failed: Int, latencies: [Double])>((0, 0, []))
        let cpuBefore = cpuSeconds()
        let start = ContinuousClock.now
        let end = start + .seconds(self.duration)
        if self.rate > 0 {
            await withTaskGroup(of: Void.self) { group in
                let interval = Duration.nanoseconds(1_000_000_000 / self.rate)
                var next = start
                while next < end {
                    try? await Task.sleep(until: next, clock: .continuous)
                    group.addTask {
                        let (ok, ms) = await push()
                        results.withLockedValue { ok ? ($0.delivered += 1) : ($0.failed += 1); $0.latencies.append(ms) }
                    }
                    next += interval
                }
            }
        } else {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<self.concurrency {
                    group.addTask {
                        while ContinuousClock.now < end {
                            let (ok, ms) = await push()
                            results.withLockedValue { ok ? ($0.delivered += 1) : ($0.failed += 1); $0.latencies.append(ms) }
                        }
                    }
                }
            }
        }
        let wall = ContinuousClock.now - start
        let cpu = cpuSeconds() - cpuBefore
        if let apns = provider as? APNsProvider { await apns.close() }
        if let webPush = provider as? WebPushProvider { await webPush.close() }

        let (delivered, failed, latencies) = results.withLockedValue { $0 }
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        let seconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        let mode = self.rate > 0 ? "open loop \(self.rate)/s" : "closed loop, \(self.concurrency) in flight"
        print(String(
            format: "connections=%d %@: %.0f pushes/s delivered (%d delivered, %d not), latency p50 %.2f ms p99 %.2f ms max %.2f ms, client CPU %.1f µs/push, RSS %d MB",
            self.connections, mode, Double(delivered) / seconds, delivered, failed, percentile(0.5), percentile(0.99),
            sorted.last ?? 0, delivered + failed > 0 ? cpu / Double(delivered + failed) * 1e6 : 0, residentMegabytes()
        ))
    }
}

/// User plus system CPU time of this process, in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Resident set size from /proc/self/statm, in MB.
func residentMegabytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let pages = Int(text.split(separator: " ")[1]) ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1_000_000
}
