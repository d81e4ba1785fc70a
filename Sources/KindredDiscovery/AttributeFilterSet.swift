import KindredProto

/// Attribute filters checked against a community's rules, then applied to members' facts.
public struct AttributeFilterSet: Sendable {
    public enum Problem: Error, Equatable {
        case tooMany
        case notFilterable(index: Int)
        case badCondition(index: Int)
    }

    let filters: [Kindred.Common.V1.AttributeFilter]

    /// Validates at most 10 filters: each on a filterable attribute, with the condition its type takes.
    public init(_ filters: [Kindred.Common.V1.AttributeFilter], rules: CommunityRules) throws(Problem) {
        guard filters.count <= 10 else { throw .tooMany }
        for (index, filter) in filters.enumerated() {
            guard let type = rules.filterable[filter.key] else { throw .notFilterable(index: index) }
            switch (filter.condition, type) {
            case (.anyOf(let list)?, .singleChoice), (.anyOf(let list)?, .multiChoice):
                guard (1...50).contains(list.values.count) else { throw .badCondition(index: index) }
            case (.integerRange(let range)?, .integer):
                guard range.minInclusive <= range.maxInclusive else { throw .badCondition(index: index) }
            case (.boolEquals?, .bool): break
            default: throw .badCondition(index: index)
            }
        }
        self.filters = filters
    }

    public var isEmpty: Bool { self.filters.isEmpty }

    /// Whether a member's facts pass every filter (a member without a value fails a filter on it).
    public func accepts(_ facts: MemberFacts) -> Bool {
        for filter in self.filters {
            guard let value = facts.values[filter.key] else { return false }
            switch (filter.condition, value) {
            case (.anyOf(let list)?, .choiceValue(let choice)):
                guard list.values.contains(choice) else { return false }
            case (.anyOf(let list)?, .choiceValues(let chosen)):
                guard chosen.values.contains(where: list.values.contains) else { return false }
            case (.integerRange(let range)?, .integerValue(let number)):
                guard number >= range.minInclusive, number <= range.maxInclusive else { return false }
            case (.boolEquals(let wanted)?, .boolValue(let flag)):
                guard wanted == flag else { return false }
            default: return false
            }
        }
        return true
    }
}
