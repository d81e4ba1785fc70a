/// One message type: its fields sorted by number and what finds them by number or by name. Plain
/// values pointing into `SchemaSet`'s storage, which lives as long as the process.
struct MessageSchema {
    /// Full protobuf name, e.g. `kindred.api.v1.SwipeRequest`.
    var fullName: SchemaName
    var fields: UnsafeBufferPointer<FieldSchema>
    /// Names of the real oneofs, for errors; proto3 `optional` fields' synthetic oneofs are not here.
    var oneofNames: UnsafeBufferPointer<SchemaName>
    /// `fieldIndex[number]` is an index into `fields`, or -1, for numbers below its count.
    var fieldIndex: UnsafeBufferPointer<Int16>
    var isMapEntry: Bool

    /// For error messages.
    var name: String { fullName.string }

    /// The index into `fields` of the field with `number`, or nil.
    @inline(__always)
    func index(ofNumber number: UInt64) -> Int? {
        if number < UInt64(fieldIndex.count) {
            let index = Int(fieldIndex[Int(number)])
            return index >= 0 ? index : nil
        }
        // Numbers past the dense table: a binary search.
        var low = 0
        var high = fields.count
        while low < high {
            let middle = (low + high) / 2
            if UInt64(fields[middle].number) < number { low = middle + 1 } else { high = middle }
        }
        return low < fields.count && UInt64(fields[low].number) == number ? low : nil
    }

    /// The index of the field whose JSON name or proto name is `name` (UTF-8), or nil.
    func index(ofName name: UnsafeRawBufferPointer) -> Int? {
        for index in fields.indices where fields[index].jsonName.equals(name) || fields[index].protoName.equals(name) {
            return index
        }
        return nil
    }
}
