// kindred-chat-bench: the chat service's load driver (Tests/Benchmarks/chat-bench.sh runs it against a release
// cluster). Users and the match service are impersonated with tokens signed by auth's own key file (what auth
// would issue), so the figures are chat's alone.
//
//   latency:    N subscribers connected (one Subscribe stream per user), messages sent at a fixed rate between
//               matched pairs; the time from the send to its arrival on the recipient's stream, p50/p99/max.
//   throughput: S concurrent senders in S threads, as fast as chat acknowledges; durable messages/s.
//   memory:     chat-server's resident memory before and after N idle Subscribe streams (--chat-pid).
//   push:       members with an APNs device registered at notify and no Subscribe stream, messages sent at a fixed
//               rate, one sender per thread; when each message's SendMessage was called and answered is written
//               to --sends, for Tests/Benchmarks/push-e2e.sh to link to the APNs peer's record (PushLatency.swift).
import ArgumentParser
import Foundation
import KindredAuth
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers

typealias Chat = Kindred.Chat.V1
typealias Method = Kindred.Chat.V1.ChatService.Method

@main
struct ChatBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "kindred-chat-bench", abstract: "Load driver of chat-server.")

    @Option(help: "chat-server address.") var chat = "127.0.0.1:50055"
    @Option(help: "auth's signing key (PEM), e.g. <data dir>/auth/signing-key.pem.") var signingKey: String
    @Option(help: "latency | throughput | memory") var mode = "latency"
    @Option(help: "Users (each with one Subscribe stream in latency and memory modes).") var users = 1000
    @Option(help: "Messages per second (latency mode).") var rate = 1000
    @Option(help: "Seconds of measurement (after 3 s of warm-up).") var duration = 20
    @Option(help: "Concurrent senders (throughput mode).") var senders = 32
    @Option(help: "chat-server's pid, to read its resident memory (memory mode).") var chatPid: Int32?
    @Option(help: "notify-server address (push mode).") var notify = "127.0.0.1:50056"
    @Option(help: "notify-server's pid, to read its CPU time and resident memory (push mode).") var notifyPid: Int32?
    @Option(help: "File to write each message's thread, device and answer time to (push mode).") var sends = ""
    @Option(help: "The APNs peer's record, to wait for the pushes and count them (push mode).") var record = ""

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let key = try SigningKey.loadOrCreate(path: self.signingKey)
        let signer = AccessTokenSigner(keyID: key.keyID, key: key.privateKey)
        func token(_ subject: String, roles: [String], session: String?) throws -> String {
            try signer.sign(
                AccessTokenClaims(
                    subject: subject, issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 900,
                    tokenID: try UUIDv7.generate(), sessionID: session,
                    communityID: subject.hasPrefix("service:") ? nil : "bench", roles: roles))
        }
        let parts = self.chat.split(separator: ":")
        let (host, port) = (String(parts[0]), Int(parts[1])!)
        // 50 streams per connection: the server allows 100 concurrent streams on one.
        let clients = (0..<max(2, self.users / 50 + 1)).map { _ in
            var configuration = GRPCClientConfiguration(host: host, port: port)
            configuration.connectionCount = 1
            configuration.defaultTimeout = .seconds(600)
            return GRPCClient(configuration: configuration, logger: logger)
        }
        let ids = try (0..<self.users).map { _ in try UUIDv7.generate() }
        let tokens = try ids.map { try token($0, roles: ["user"], session: try UUIDv7.generate()) }
        let match = try token("service:match", roles: ["service"], session: nil)

        // Pairs (2i, 2i+1), each with an open thread.
        var threads: [String] = []
        var events: [Kindred.Common.V1.Event] = []
        for pair in 0..<(self.users / 2) {
            let thread = try UUIDv7.generate()
            threads.append(thread)
            var event = Kindred.Common.V1.Event()
            event.eventId = try UUIDv7.generate()
            event.producer = "match"
            event.userId = ids[2 * pair]
            event.communityId = "bench"
            event.occurredUnixMs = Int64(Date().timeIntervalSince1970 * 1000)
            event.payload = .matchCreated(
                .with {
                    $0.matchId = thread
                    $0.userIds = [ids[2 * pair], ids[2 * pair + 1]].sorted()
                    $0.initiatorUserId = ids[2 * pair]
                    $0.mode = .mutual
                })
            events.append(event)
        }
        for start in stride(from: 0, to: events.count, by: 100) {
            var request = Kindred.Common.V1.DeliverEventsRequest()
            request.events = Array(events[start..<min(start + 100, events.count)])
            _ = try await clients[0].unary(
                Method.deliverEvents, request, metadata: ["authorization": .string("Bearer " + match)])
        }
        let metadata: @Sendable (Int) -> Metadata = { ["authorization": .string("Bearer " + tokens[$0])] }

        switch self.mode {
        case "throughput":
            try await self.throughput(clients: clients, threads: threads, metadata: metadata)
        case "memory":
            try await self.memory(clients: clients, metadata: metadata)
        case "push":
            try await self.pushLatency(clients: clients, tokens: tokens, threads: threads, metadata: metadata)
        default:
            try await self.latency(clients: clients, ids: ids, threads: threads, metadata: metadata)
        }
        for client in clients { await client.close() }
    }

    /// Opens one Subscribe stream per user; `onMessage(user, message)` for every message event.
    func subscribe(
        clients: [GRPCClient], metadata: @escaping @Sendable (Int) -> Metadata,
        onMessage: @escaping @Sendable (Int, Chat.ChatMessage) -> Void
    ) async throws -> (tasks: [Task<Void, Never>], ready: NIOLockedValueBox<Int>) {
        let ready = NIOLockedValueBox(0)
        var tasks: [Task<Void, Never>] = []
        for user in 0..<self.users {
            let client = clients[user % clients.count]
            tasks.append(
                Task {
                    try? await client.serverStreaming(
                        Method.subscribe, Chat.SubscribeRequest(), metadata: metadata(user),
                        options: CallOptions(timeout: .seconds(600))
                    ) { stream in
                        ready.withLockedValue { $0 += 1 }
                        for try await response in stream {
                            if case .message(let message)? = response.event?.event { onMessage(user, message) }
                        }
                    }
                })
        }
        return (tasks, ready)
    }

    func latency(
        clients: [GRPCClient], ids: [String], threads: [String], metadata: @escaping @Sendable (Int) -> Metadata
    ) async throws {
        let clock = ContinuousClock()
        let origin = clock.now
        let measuring = NIOLockedValueBox(false)
        let samples = NIOLockedValueBox([Double]())
        let acknowledgements = NIOLockedValueBox([Double]())
        // Deliveries by the second of the run they arrived in (slow phases show as seconds with high medians).
        let bySecond = NIOLockedValueBox([Int: [Double]]())
        let ids = ids
        let (tasks, ready) = try await self.subscribe(clients: clients, metadata: metadata) { user, message in
            // The recipient's stream only (the sender's own devices get it too).
            guard message.senderUserId != ids[user], let sent = Int64(message.body.split(separator: " ").last ?? "")
            else { return }
            let elapsed = (clock.now - origin) - .nanoseconds(sent)
            if measuring.withLockedValue({ $0 }) {
                let milliseconds = elapsed.milliseconds
                samples.withLockedValue { $0.append(milliseconds) }
                let second = Int((clock.now - origin).components.seconds)
                bySecond.withLockedValue { $0[second, default: []].append(milliseconds) }
            }
        }
        while ready.withLockedValue({ $0 }) < self.users { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .milliseconds(500))
        print("subscribers connected: \(self.users)")
        let interval = Duration.seconds(1) / self.rate
        let failures = NIOLockedValueBox(0)
        let total = (3 + self.duration) * self.rate
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                if index == 3 * self.rate { measuring.withLockedValue { $0 = true } }
                try await clock.sleep(until: start + interval * index)
                let pair = index % threads.count
                let sender = 2 * pair + (index / threads.count) % 2
                let client = clients[sender % clients.count]
                let thread = threads[pair]
                let measured = index >= 3 * self.rate
                group.addTask {
                    let sendStart = clock.now
                    let stamp = (sendStart - origin).components
                    var request = Chat.SendMessageRequest()
                    request.threadId = thread
                    request.clientMessageId = "b\(index)"
                    request.body = "bench \(stamp.seconds * 1_000_000_000 + stamp.attoseconds / 1_000_000_000)"
                    do {
                        _ = try await client.unary(Method.sendMessage, request, metadata: metadata(sender))
                        if measured {
                            let milliseconds = (clock.now - sendStart).milliseconds
                            acknowledgements.withLockedValue { $0.append(milliseconds) }
                        }
                    } catch {
                        failures.withLockedValue { $0 += 1 }
                    }
                }
            }
            try await group.waitForAll()
        }
        try await Task.sleep(for: .seconds(2))
        measuring.withLockedValue { $0 = false }
        let sorted = samples.withLockedValue { $0 }.sorted()
        let sentMeasured = self.duration * self.rate
        func percentile(_ p: Double, of sorted: [Double]) -> Double {
            sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        func percentile(_ p: Double) -> Double { percentile(p, of: sorted) }
        let achieved = Double(total) / (clock.now - start - .seconds(2)).seconds
        print(String(
            format: "latency: %d subscribers, %d msg/s target (%.0f achieved), %d s: received %d of %d, send failures %d",
            self.users, self.rate, achieved, self.duration, sorted.count, sentMeasured, failures.withLockedValue { $0 }))
        print(String(
            format: "send -> delivered ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f", percentile(0.5),
            percentile(0.9), percentile(0.99), percentile(0.999), sorted.last ?? .nan))
        let acknowledged = acknowledgements.withLockedValue { $0 }.sorted()
        print(String(
            format: "send -> acknowledged ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f", percentile(0.5, of: acknowledged),
            percentile(0.9, of: acknowledged), percentile(0.99, of: acknowledged), acknowledged.last ?? .nan))
        let medians = bySecond.withLockedValue { $0 }.sorted { $0.key < $1.key }.map { second, values in
            String(format: "%.0f", percentile(0.5, of: values.sorted()))
        }
        print("send -> delivered p50 ms by second: \(medians.joined(separator: " "))")
        for task in tasks { task.cancel() }
    }

    func throughput(clients: [GRPCClient], threads: [String], metadata: @escaping @Sendable (Int) -> Metadata)
        async throws
    {
        let clock = ContinuousClock()
        let acknowledged = NIOLockedValueBox(0)
        let failures = NIOLockedValueBox(0)
        let measuring = NIOLockedValueBox(false)
        let end = clock.now + .seconds(3 + self.duration)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in 0..<min(self.senders, threads.count) {
                let client = clients[sender % clients.count]
                group.addTask {
                    var number = 0
                    while clock.now < end {
                        number += 1
                        var request = Chat.SendMessageRequest()
                        request.threadId = threads[sender]
                        request.clientMessageId = "t\(number)"
                        request.body = "throughput \(number)"
                        do {
                            _ = try await client.unary(Method.sendMessage, request, metadata: metadata(2 * sender))
                            if measuring.withLockedValue({ $0 }) { acknowledged.withLockedValue { $0 += 1 } }
                        } catch {
                            failures.withLockedValue { $0 += 1 }
                        }
                    }
                }
            }
            try await Task.sleep(for: .seconds(3))
            measuring.withLockedValue { $0 = true }
            try await group.waitForAll()
        }
        let count = acknowledged.withLockedValue { $0 }
        print(String(
            format: "throughput: %d senders, %d s: %d messages acknowledged durably = %.0f msg/s, failures %d",
            min(self.senders, threads.count), self.duration, count, Double(count) / Double(self.duration),
            failures.withLockedValue { $0 }))
    }

    func memory(clients: [GRPCClient], metadata: @escaping @Sendable (Int) -> Metadata) async throws {
        guard let pid = self.chatPid else { throw ValidationError("--chat-pid is required in memory mode") }
        func resident() -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        try await Task.sleep(for: .seconds(1))
        let before = resident()
        let (tasks, ready) = try await self.subscribe(clients: clients, metadata: metadata) { _, _ in }
        while ready.withLockedValue({ $0 }) < self.users { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .seconds(3))
        let after = resident()
        print(String(
            format: "memory: chat-server RSS %.1f MB before, %.1f MB with %d idle subscribers: %.1f KB per subscriber",
            Double(before) / 1e6, Double(after) / 1e6, self.users, Double(after - before) / Double(self.users) / 1000))
        for task in tasks { task.cancel() }
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    var milliseconds: Double { self.seconds * 1000 }
}
