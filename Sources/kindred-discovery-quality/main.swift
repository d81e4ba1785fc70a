import Foundation
import KindredDiscovery
import KindredDiscoveryQuality

// Offline quality of discovery's ranking (issue 12): AUC of like prediction vs the latent model's ceiling, and
// matches per 100 swipes for Kindred's reciprocal ranking vs random, distance-only and like-only decks.
// Usage (Tests/Benchmarks/discovery-quality.sh runs them):
//   kindred-discovery-quality [members=10000] [seed=1] [warm-up swipes=40] [pool=500|all] [cities=1]
//   kindred-discovery-quality curve [members] [seed] [cities]: warm-up 20/40/100/200 at pool 500, then pools
//     100/200/500 at warm-up 40 (the learning curve and the pool's depth)
//   kindred-discovery-quality tune [members] [seed] [warm-up] [cities]: validation AUC for a grid of settings
//     (the test split unseen)
let given = Array(CommandLine.arguments.dropFirst())
let mode = given.first.flatMap { ["tune", "curve"].contains($0) ? $0 : nil }
let arguments = mode == nil ? given : Array(given.dropFirst())
func argument(_ index: Int) -> String? { index < arguments.count ? arguments[index] : nil }
var spec = PopulationSpec()
if let members = argument(0).flatMap(Int.init) { spec.members = members }
if let seed = argument(1).flatMap(UInt64.init) { spec.seed = seed }
let started = Date()

func describe(_ population: Population) -> String {
    let depths = population.candidates.map(\.count).sorted()
    let mean = Double(depths.reduce(0, +)) / Double(max(1, depths.count))
    return String(
        format: "members %d in %d cities, seed %llu; compatible members within the radius per member: mean %.0f, median %d",
        population.members.count, population.spec.cities, population.spec.seed, mean, depths.isEmpty ? 0 : depths[depths.count / 2])
}

func line(_ report: QualityReport, warmup: Int, pool: Int?) -> String {
    let m = report.matchesPer100
    let ours = m[.reciprocal] ?? 0
    return String(
        format: "%6d %6@ %5.3f %5.3f %5.2f  %6.2f %6.2f %6.2f %6.2f %6.2f  %5.2fx %5.2fx",
        warmup, (pool.map(String.init) ?? "all") as NSString, report.modelAUC, report.ceilingAUC, report.liftShare,
        ours, m[.likeOnly] ?? 0, m[.distance] ?? 0, m[.random] ?? 0, m[.oracle] ?? 0,
        ours / max(0.001, m[.distance] ?? 0), ours / max(0.001, m[.likeOnly] ?? 0))
}
let header = "warmup   pool   AUC  ceil  lift  recipr  like   dist  random oracle  r/dist r/like"

switch mode {
case "tune":
    if let cities = argument(3).flatMap(Int.init) { spec.cities = cities }
    let population = Population(spec: spec)
    print(describe(population))
    let warmup = argument(2).flatMap(Int.init) ?? 40
    print("validation AUC (20 % of the training swipes; test swipes unseen), warm-up \(warmup)")
    print("intercept_k appeal_k taste_k taste_components  AUC")
    var best: (auc: Double, settings: String) = (0, "")
    for interceptK in [10.0, 30, 100] {
        for appealK in [5.0, 10, 20] {
            for tasteK in [4.0, 12, 40] {
                for components in [0, 4] where components == 4 || tasteK == 12 {
                    var simulation = QualitySimulation(population: population)
                    simulation.validation = true
                    simulation.warmupSwipes = warmup
                    simulation.settings.interceptPseudoSwipes = interceptK
                    simulation.settings.appealPseudoSwipes = appealK
                    simulation.settings.tastePseudoSwipes = tasteK
                    simulation.settings.tasteComponents = components
                    let auc = simulation.run().modelAUC
                    let line = String(format: "%11.0f %8.0f %7.0f %16d  %.4f", interceptK, appealK, tasteK, components, auc)
                    print(line)
                    if auc > best.auc { best = (auc, line) }
                }
            }
        }
    }
    print("best:", best.settings, String(format: "(%.1f s)", Date().timeIntervalSince(started)))
case "curve":
    if let cities = argument(2).flatMap(Int.init) { spec.cities = cities }
    let population = Population(spec: spec)
    print(describe(population))
    print(header)
    for (warmup, pool) in [(20, 500), (40, 500), (100, 500), (200, 500), (40, 100), (40, 200)] {
        var simulation = QualitySimulation(population: population)
        simulation.warmupSwipes = warmup
        simulation.pool = pool
        print(line(simulation.run(), warmup: warmup, pool: pool))
    }
    print(String(format: "%.1f s", Date().timeIntervalSince(started)))
default:
    if let cities = argument(4).flatMap(Int.init) { spec.cities = cities }
    let population = Population(spec: spec)
    print(describe(population))
    var simulation = QualitySimulation(population: population)
    if let warmup = argument(2).flatMap(Int.init) { simulation.warmupSwipes = warmup }
    if let pool = argument(3) { simulation.pool = Int(pool) }
    let report = simulation.run()
    print("warm-up swipes \(report.warmupSwipes), held out \(report.heldOutSwipes)")
    print(String(format: "AUC model %.3f, ceiling %.3f, lift share %.2f (target >= 0.90)", report.modelAUC, report.ceilingAUC, report.liftShare))
    for policy in DeckPolicy.allCases {
        print(String(format: "  %-10@ %6.2f matches per 100 swipes (%d swipes)", policy.rawValue as NSString, report.matchesPer100[policy] ?? 0, report.evaluationSwipes[policy] ?? 0))
    }
    print(header)
    print(line(report, warmup: simulation.warmupSwipes, pool: simulation.pool))
    print(String(format: "(targets: r/dist >= 2, r/like >= 1.3, lift >= 0.90); %.1f s", Date().timeIntervalSince(started)))
}
