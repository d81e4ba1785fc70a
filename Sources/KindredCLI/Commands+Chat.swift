import ArgumentParser
import Foundation
import KindredGRPC
import KindredProto
import Synchronization

private typealias ChatAPI = Kindred.Api.V1.ChatService.Method

/// `kindred threads [--json]`: the signed-in user's open chat threads, most recent first.
struct Threads: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "threads", abstract: "List your open chat threads (most recent activity first).")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let threads = try await ChatCommands.allThreads(invocation.gateway)
            if threads.isEmpty { Console.out("no open threads") }
            for thread in threads {
                let last = thread.lastMessage.map { ChatCommands.preview($0.body) } ?? "(no messages yet)"
                Console.out("\(thread.threadId)  with \(thread.otherUserId)  unread \(thread.unreadCount)  \(last)")
            }
        }
    }
}

/// `kindred chat USER`: prints the conversation with USER (a user id, or a thread id), then incoming messages as
/// they arrive while each line typed on stdin is sent. Ends at end of input.
struct ChatWith: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat",
        abstract: "Chat with a match: history, then live messages; each line you type is sent.",
        discussion: "USER is the other member's user id (see `kindred threads`) or a thread id. Lines are sent "
            + "as messages (retried with the same client id if the gateway is briefly unavailable, so none is "
            + "sent twice); end of input (Ctrl-D) ends the command."
    )

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The other member's user id, or a thread id.") var user: String
    @Option(help: "Messages of history to print first (0..100).") var history: Int32 = 20

    func run() async throws {
        try await Invocation.run(self.global) { invocation in
            let gateway = invocation.gateway
            let threads = try await ChatCommands.allThreads(gateway)
            guard let thread = threads.first(where: { $0.otherUserId == self.user || $0.threadId == self.user }) else {
                throw CLIError.usage("no open thread with \(self.user) (see `kindred threads`)")
            }
            guard let transport = gateway.transport as? GRPCGatewayTransport else { return }
            let view = ChatView(gateway: gateway, threadID: thread.threadId, me: try gateway.storedSession().userId)
            let session = try await gateway.usableSession()
            // Subscribe before reading the history, and let the transcript catch up on what fell between the two
            // (see ChatTranscript): printing the history first used to lose what was sent meanwhile.
            let live = Task {
                try await transport.client.serverStreaming(
                    ChatAPI.subscribe, Kindred.Api.V1.SubscribeRequest(),
                    metadata: ["authorization": .string("Bearer \(session.accessToken)")],
                    options: CallOptions(timeout: .seconds(86_400))
                ) { stream in
                    for try await event in stream {
                        await view.apply { $0.streamDeliveredEvent() }
                        switch event.event {
                        case .message(let message)? where message.threadId == thread.threadId:
                            await view.apply { $0.received(message) }
                        case .typing(let typing)? where typing.threadId == thread.threadId:
                            Console.error("(\(typing.userId.prefix(8)) is typing)")
                        case .threadClosed(let closed)? where closed.threadId == thread.threadId:
                            Console.out("-- this conversation has ended")
                        default:
                            break
                        }
                    }
                }
            }
            defer { live.cancel() }
            var request = Kindred.Api.V1.HistoryRequest()
            request.threadId = thread.threadId
            request.pageSize = max(1, min(self.history, 100))
            let page = try await gateway.authenticated(ChatAPI.history, request)
            await view.apply { $0.history(page.messages) }
            while let text = readLine(strippingNewline: true) {
                guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
                var send = Kindred.Api.V1.SendMessageRequest()
                send.threadId = thread.threadId
                send.clientMessageId = UUID().uuidString.lowercased()
                send.body = text
                let sent = try await ChatCommands.withRetries { try await gateway.authenticated(ChatAPI.sendMessage, send) }
                if let message = sent.message { await view.apply { $0.received(message) } }
            }
        }
    }
}

/// The screen of `kindred chat`: prints what the transcript says, in order (under its lock), fetches the
/// catch-ups it asks for, and marks the other member's messages read once printed.
final class ChatView: Sendable {
    private let gateway: GatewayClient
    private let threadID: String
    private let me: String
    private let transcript = Mutex(ChatTranscript())

    init(gateway: GatewayClient, threadID: String, me: String) {
        self.gateway = gateway
        self.threadID = threadID
        self.me = me
    }

    /// Feeds one event to the transcript, prints what it releases, and performs the catch-ups it asks for (a few
    /// rounds at most: each answers up to the newest message at its time).
    func apply(_ event: (inout ChatTranscript) -> ChatTranscript.Step) async {
        var step = self.show(event)
        await self.markRead(step.print)
        for _ in 0..<3 {
            guard let after = step.catchUpAfter else { return }
            do {
                let missed = try await self.messages(after: after)
                step = self.show { $0.caughtUp(missed) }
                await self.markRead(step.print)
            } catch {
                Console.error("(could not fetch missed messages: \(error))")
                _ = self.show { $0.caughtUp([]) }
                return
            }
        }
    }

    private func show(_ event: (inout ChatTranscript) -> ChatTranscript.Step) -> ChatTranscript.Step {
        self.transcript.withLock { transcript in
            let step = event(&transcript)
            for message in step.print { Console.out(ChatCommands.line(message, me: self.me)) }
            return step
        }
    }

    private func markRead(_ printed: [Kindred.Api.V1.ChatMessage]) async {
        guard let newest = printed.last(where: { $0.senderUserId != self.me }) else { return }
        _ = try? await self.gateway.authenticated(
            ChatAPI.markRead, .with { $0.threadId = self.threadID; $0.upToMessageId = newest.messageId })
    }

    /// The thread's messages after `sequence`, oldest first, up to the newest now.
    private func messages(after sequence: Int64) async throws -> [Kindred.Api.V1.ChatMessage] {
        var messages: [Kindred.Api.V1.ChatMessage] = []
        var token = ""
        repeat {
            var request = Kindred.Api.V1.HistoryRequest()
            request.threadId = self.threadID
            request.pageSize = 100
            request.direction = .newer
            if token.isEmpty { request.fromSequence = sequence } else { request.pageToken = token }
            let page = try await self.gateway.authenticated(ChatAPI.history, request)
            messages += page.messages
            token = page.nextPageToken
        } while !token.isEmpty && messages.count < 10_000
        return messages
    }
}

enum ChatCommands {
    static func allThreads(_ gateway: GatewayClient) async throws -> [Kindred.Api.V1.ChatThread] {
        var threads: [Kindred.Api.V1.ChatThread] = []
        var token = ""
        repeat {
            let page = try await gateway.authenticated(
                ChatAPI.listThreads, .with { $0.pageSize = 100; $0.pageToken = token })
            threads += page.threads
            token = page.nextPageToken
        } while !token.isEmpty && threads.count < 1000
        return threads
    }

    /// A failed send is retried (same client id: never sent twice) while the gateway or chat is unavailable.
    static func withRetries<T>(_ body: () async throws -> T) async throws -> T {
        var delay: Duration = .milliseconds(200)
        for _ in 0..<5 {
            do {
                return try await body()
            } catch let error as RPCError where error.code == .unavailable || error.code == .deadlineExceeded {
                try await Task.sleep(for: delay)
                delay *= 2
            }
        }
        return try await body()
    }

    static func line(_ message: Kindred.Api.V1.ChatMessage, me: String) -> String {
        let time = Date(timeIntervalSince1970: Double(message.sentUnixMs) / 1000)
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm"
        let who = message.senderUserId == me ? "me" : String(message.senderUserId.prefix(8))
        return "[\(formatter.string(from: time))] \(who): \(message.body)"
    }

    static func preview(_ body: String) -> String {
        let line = body.replacingOccurrences(of: "\n", with: " ")
        return line.count > 40 ? String(line.prefix(39)) + "…" : line
    }
}
