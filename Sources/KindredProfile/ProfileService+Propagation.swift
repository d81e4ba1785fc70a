import KindredServiceKit

extension ProfileService {
    /// The consumers a member's next deck call or swipe reads their profile from: discovery (the deck's index; with
    /// geographic shards every shard, `discovery_<n>`, since a move may hand the member to another) and match (who
    /// may swipe on whom).
    static let readYourWritesConsumers: Set<String> = ["discovery", "match"]

    static func readsYourWrites(_ consumer: String) -> Bool {
        Self.readYourWritesConsumers.contains(consumer) || consumer.hasPrefix("discovery_")
    }

    /// Returns once discovery and match have applied the events of `user`'s partition committed so far, so the
    /// member's next GetDeck or Swipe sees the profile, location or eligibility the write just answered (DESIGN §6,
    /// read-your-writes): CreateProfile, UpdateProfile, UpdateLocation, UploadPhoto and DeletePhoto. UNAVAILABLE with retry-after when one is still behind after `propagationTimeout`: the
    /// change is recorded (a retried CreateProfile with its idempotency key, or a repeated UpdateProfile, waits
    /// again).
    func awaitReaders(of user: String) async throws {
        let consumers = self.configuration.events.consumers.map(\.name).filter(Self.readsYourWrites)
        let started = ContinuousClock.now
        let applied = try await Self.outbox.awaitDelivery(
            partition: user,
            consumers: consumers,
            on: self.database,
            timeout: self.configuration.propagationTimeout
        )
        self.propagationWait.recordNanoseconds(Int64((ContinuousClock.now - started) / .nanoseconds(1)))
        guard applied else {
            self.propagationTimeouts.increment()
            self.logger.warning(
                "profile change not yet applied by discovery and match",
                metadata: ["partition.kind": "user"]
            )
            throw ProfileError.notYetApplied
        }
    }
}
