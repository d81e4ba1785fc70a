import Foundation
import KindredDiscoveryQuality

// Offline quality of discovery's ranking (issue 12): AUC of like prediction vs the latent model's ceiling, and
// matches per 100 swipes for Kindred's reciprocal ranking vs random, distance-only and like-only decks.
// Usage: kindred-discovery-quality [members] [seed] [warm-up swipes per member]  (Tests/Benchmarks/discovery-quality.sh runs it).
let arguments = CommandLine.arguments.dropFirst()
var spec = PopulationSpec()
if let members = arguments.first.flatMap(Int.init) { spec.members = members }
if let seed = arguments.dropFirst().first.flatMap(UInt64.init) { spec.seed = seed }
let started = Date()
let population = Population(spec: spec)
var simulation = QualitySimulation(population: population)
if let warmup = arguments.dropFirst(2).first.flatMap(Int.init) { simulation.warmupSwipes = warmup }
let report = simulation.run()
let seconds = Date().timeIntervalSince(started)
print("members \(report.members), seed \(spec.seed), warm-up swipes \(report.warmupSwipes), held out \(report.heldOutSwipes)")
print(String(format: "AUC model %.3f, ceiling %.3f, lift share %.2f (target >= 0.90)", report.modelAUC, report.ceilingAUC, report.liftShare))
for policy in DeckPolicy.allCases {
    print(String(format: "  %-10@ %6.2f matches per 100 swipes (%d swipes)", policy.rawValue as NSString, report.matchesPer100[policy] ?? 0, report.evaluationSwipes[policy] ?? 0))
}
let ours = report.matchesPer100[.reciprocal] ?? 0
print(String(format: "reciprocal / distance %.2fx (target >= 2), reciprocal / like-only %.2fx (target >= 1.3); %.1f s", ours / max(0.001, report.matchesPer100[.distance] ?? 0), ours / max(0.001, report.matchesPer100[.likeOnly] ?? 0), seconds))
