import Foundation
import KindredDiscovery
import KindredDiscoveryQuality

// Offline quality of discovery's ranking (issue 12): AUC of like prediction vs the latent model's ceiling, and
// matches per 100 swipes for Kindred's reciprocal ranking vs random, distance-only and like-only decks.
// Usage: kindred-discovery-quality [members] [seed] [warm-up swipes per member]  (Tests/Benchmarks/discovery-quality.sh runs it).
//        kindred-discovery-quality tune [members] [seed]: validation AUC for a grid of settings (the test split unseen).
var arguments = CommandLine.arguments.dropFirst()
let tuning = arguments.first == "tune"
if tuning { arguments = arguments.dropFirst() }
var spec = PopulationSpec()
if let members = arguments.first.flatMap(Int.init) { spec.members = members }
if let seed = arguments.dropFirst().first.flatMap(UInt64.init) { spec.seed = seed }
let started = Date()
let population = Population(spec: spec)

if tuning {
    print("members \(spec.members), seed \(spec.seed): validation AUC (20 % of the training swipes; test swipes unseen)")
    print("user_lambda intercept_lambda appeal_pseudo_swipes taste_components  AUC")
    var best: (auc: Double, settings: String) = (0, "")
    for userLambda in [12.0, 500] {
        for interceptLambda in [12.0, 30] {
            for appealPseudoSwipes in [10.0] {
                for tasteComponents in [0, 4, 8] {
                    var simulation = QualitySimulation(population: population)
                    simulation.validation = true
                    simulation.settings.userLambda = userLambda
                    simulation.settings.interceptLambda = interceptLambda
                    simulation.settings.appealPseudoSwipes = appealPseudoSwipes
                    simulation.settings.tasteComponents = tasteComponents
                    let auc = simulation.run().modelAUC
                    let line = String(
                        format: "%11.0f %16.0f %20.0f %16d  %.4f", userLambda, interceptLambda, appealPseudoSwipes,
                        tasteComponents, auc)
                    print(line)
                    if auc > best.auc { best = (auc, line) }
                }
            }
        }
    }
    print("best:", best.settings, String(format: "(%.1f s)", Date().timeIntervalSince(started)))
    exit(0)
}

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
