/// One enum type: its values by number (JSON output) and by name (JSON input).
struct EnumSchema {
    /// Full protobuf name, e.g. `kindred.api.v1.SwipeAction`.
    var name: String
    /// `(number, "\"NAME\"")` sorted by number; the first name of an aliased number wins.
    var quotedNames: [(number: Int32, quoted: [UInt8])]
    var values: [(name: String, number: Int32)]

    /// The value's name in quotes, or nil for a number the enum does not define.
    func quotedName(of number: Int32) -> [UInt8]? {
        var low = 0
        var high = quotedNames.count
        while low < high {
            let middle = (low + high) / 2
            if quotedNames[middle].number < number { low = middle + 1 } else { high = middle }
        }
        return low < quotedNames.count && quotedNames[low].number == number ? quotedNames[low].quoted : nil
    }

    /// The number of the value named `name` (UTF-8), or nil.
    func number(ofName name: UnsafeRawBufferPointer) -> Int32? {
        for value in values {
            if value.name.utf8.elementsEqual(name) { return value.number }
        }
        return nil
    }
}
