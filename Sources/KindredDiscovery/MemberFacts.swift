import KindredProto

/// The facts of one member that filters and search need beyond the index's bits: filterable attribute
/// values and the words of text attributes.
public struct MemberFacts: Sendable, Equatable {
    public var values: [String: Kindred.Common.V1.AttributeValue.Value]
    /// Lower-cased words of TEXT attributes (SearchMembers' query).
    public var words: Set<String>

    /// No filterable values and no words (not stored).
    public var isEmpty: Bool { self.values.isEmpty && self.words.isEmpty }

    public init(values: [String: Kindred.Common.V1.AttributeValue.Value] = [:], words: Set<String> = []) {
        self.values = values
        self.words = words
    }
}
