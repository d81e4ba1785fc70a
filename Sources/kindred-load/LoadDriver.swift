import ArgumentParser
import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import Logging

/// What every driver of this tool shares: the signer of the cluster under test, a client, the callers in flight
/// and the report of latencies and outcomes.

/// A signer with auth's signing key of the cluster under test (its key file: a benchmark tool, never a
/// production path), under the key id auth publishes for it.
func clusterSigner(keyFile: String) throws -> AccessTokenSigner {
    let key = try Ed25519PrivateKey(pemFile: keyFile)
    return AccessTokenSigner(keyID: String(Base64URL.encode(SHA256.hash(key.publicKey.rawRepresentation)).prefix(16)), key: key)
}

/// A client of `address` (host:port) over `connections` HTTP/2 connections, 10 s per call unless told otherwise.
func loadClient(_ address: String, connections: Int, logger: Logger) throws -> GRPCClient {
    let (host, port) = try hostAndPort(address)
    var configuration = GRPCClientConfiguration(host: host, port: port)
    configuration.connectionCount = connections
    configuration.defaultTimeout = .seconds(10)
    return GRPCClient(configuration: configuration, logger: logger)
}

/// What the callers of a run did: the latency of every call that succeeded, every outcome (`OK`, a status code
/// or an error type) with its count, and a sum the run's calls return (matches made, candidates received).
struct LoadTally {
    var seconds: Double
    var latencies: [Duration]
    var outcomes: [String: Int]
    var counted: Int
    /// Latencies of successful calls by what they answered, for the runs that split them (swipes by outcome).
    var byOutcome: [String: [Duration]] = [:]

    var succeeded: Int { self.outcomes["OK", default: 0] }

    /// The latency percentiles line and the outcomes line.
    func printLatenciesAndOutcomes() {
        let sorted = self.latencies.sorted()
        let line = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)]
            .map { "\($0.0) \(percentileText(sorted, $0.1))" }.joined(separator: "  ")
        print("latency \(line)")
        print("outcomes: \(self.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    }
}

/// The `p` percentile of sorted latencies in milliseconds ("-" when there are none).
func percentileText(_ sorted: [Duration], _ p: Double, decimals: Int = 2) -> String {
    guard !sorted.isEmpty else { return "-" }
    return String(format: "%.\(decimals)f ms", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))].milliseconds)
}

/// Runs `concurrency` callers until `duration` has passed, each calling `call` again as soon as it answers, and
/// adds up what they did. `call` returns what the run counts (matches, candidates), or nil when there is no work
/// left; a call that throws counts as its status code.
func driveLoad(
    concurrency: Int, for duration: Duration, _ call: @escaping @Sendable () async throws -> Int?
) async -> LoadTally {
    let start = ContinuousClock.now
    let end = start + duration
    let total = await withTaskGroup(of: LoadTally.self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                var tally = LoadTally(seconds: 0, latencies: [], outcomes: [:], counted: 0)
                while ContinuousClock.now < end {
                    let sent = ContinuousClock.now
                    do {
                        guard let counted = try await call() else { break }
                        tally.latencies.append(ContinuousClock.now - sent)
                        tally.outcomes["OK", default: 0] += 1
                        tally.counted += counted
                    } catch let error as RPCError {
                        tally.outcomes["\(error.code)", default: 0] += 1
                    } catch {
                        tally.outcomes["\(type(of: error))", default: 0] += 1
                    }
                }
                return tally
            }
        }
        var total = LoadTally(seconds: 0, latencies: [], outcomes: [:], counted: 0)
        for await tally in group {
            total.latencies += tally.latencies
            total.outcomes.merge(tally.outcomes, uniquingKeysWith: +)
            total.counted += tally.counted
        }
        return total
    }
    return LoadTally(seconds: (ContinuousClock.now - start).seconds, latencies: total.latencies, outcomes: total.outcomes, counted: total.counted)
}

func hostAndPort(_ text: String) throws -> (String, Int) {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
        throw ValidationError("host:port expected: \(text)")
    }
    return (String(text[..<colon]), port)
}

extension Duration {
    var seconds: Double { Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18 }
    var milliseconds: Double { self.seconds * 1000 }
}
