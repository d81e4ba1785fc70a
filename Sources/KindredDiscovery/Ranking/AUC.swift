/// Area under the ROC curve of scores against binary labels: the probability that a random positive is
/// scored above a random negative (ties count half). Computed from ranks (Mann–Whitney U) in O(n log n).
/// Returns nil when there are no positives or no negatives.
public func areaUnderROC(scores: [Double], labels: [Bool]) -> Double? {
    precondition(scores.count == labels.count, "one label per score")
    let order = scores.indices.sorted { scores[$0] < scores[$1] }
    var rankSumPositives = 0.0
    var positives = 0
    var start = 0
    while start < order.count {
        var end = start
        while end + 1 < order.count && scores[order[end + 1]] == scores[order[start]] { end += 1 }
        // Tied scores share the average of their 1-based ranks.
        let averageRank = Double(start + end + 2) / 2
        for position in start...end where labels[order[position]] {
            rankSumPositives += averageRank
            positives += 1
        }
        start = end + 1
    }
    let negatives = labels.count - positives
    guard positives > 0, negatives > 0 else { return nil }
    let u = rankSumPositives - Double(positives * (positives + 1)) / 2
    return u / (Double(positives) * Double(negatives))
}
