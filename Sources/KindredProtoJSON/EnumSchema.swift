/// One enum type: its values by number (JSON output) and by name (JSON input).
struct EnumSchema {
    struct Value {
        var number: Int32
        var name: SchemaName
        /// `"NAME"`, as written on output.
        var quoted: SchemaName
    }

    /// Full protobuf name, e.g. `kindred.api.v1.SwipeAction`.
    var fullName: SchemaName
    /// Sorted by number, one per number (the first name of an aliased number).
    var byNumber: UnsafeBufferPointer<Value>
    /// Every value, aliases included, in declaration order.
    var values: UnsafeBufferPointer<Value>

    var name: String { fullName.string }

    /// The value's name in quotes, or nil for a number the enum does not define.
    func quotedName(of number: Int32) -> SchemaName? {
        var low = 0
        var high = byNumber.count
        while low < high {
            let middle = (low + high) / 2
            if byNumber[middle].number < number { low = middle + 1 } else { high = middle }
        }
        return low < byNumber.count && byNumber[low].number == number ? byNumber[low].quoted : nil
    }

    /// The number of the value named `name` (UTF-8), or nil.
    func number(ofName name: UnsafeRawBufferPointer) -> Int32? {
        for value in values where value.name.equals(name) { return value.number }
        return nil
    }
}
