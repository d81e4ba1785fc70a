/// JSON numbers as the proto3 mapping reads them: integers exactly (1e2 and 100.0 are the integer
/// 100; 1.5 is no integer), floating point through the standard library's correctly rounded parser.
enum JSONNumber {
    /// The end of the JSON number starting at `start`, or nil when the grammar does not match.
    static func scan(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int? {
        var position = start
        @inline(__always) func isDigit(_ offset: Int) -> Bool {
            offset < end && bytes[offset] >= UInt8(ascii: "0") && bytes[offset] <= UInt8(ascii: "9")
        }
        if position < end && bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard isDigit(position) else { return nil }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while isDigit(position) { position += 1 }
        }
        if position < end && bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard isDigit(position) else { return nil }
            while isDigit(position) { position += 1 }
        }
        if position < end && (bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")) {
            position += 1
            if position < end && (bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")) {
                position += 1
            }
            guard isDigit(position) else { return nil }
            while isDigit(position) { position += 1 }
        }
        return position
    }

    enum IntegerResult {
        case value(negative: Bool, magnitude: UInt64)
        case notInteger
        case outOfRange
    }

    /// The exact integer a well-formed JSON number (see `scan`) denotes.
    static func integer(_ bytes: UnsafeRawBufferPointer) -> IntegerResult {
        var position = 0
        let end = bytes.count
        let negative = end > 0 && bytes[0] == UInt8(ascii: "-")
        if negative { position = 1 }
        // Significant digits (integer and fraction part) and the exponent that applies to them.
        var digitsStart = position
        var mantissaEnd = position
        var fractionDigits = 0
        var inFraction = false
        while position < end {
            let byte = bytes[position]
            if byte == UInt8(ascii: ".") {
                inFraction = true
            } else if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                break
            } else if inFraction {
                fractionDigits += 1
            }
            position += 1
        }
        mantissaEnd = position
        var exponent = 0
        if position < end {
            position += 1
            var exponentNegative = false
            if bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                exponentNegative = bytes[position] == UInt8(ascii: "-")
                position += 1
            }
            while position < end {
                // Past any meaningful size: a zero mantissa stays zero, anything else is out of range.
                if exponent < 100_000 { exponent = exponent * 10 + Int(bytes[position] - UInt8(ascii: "0")) }
                position += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        exponent -= fractionDigits
        // Drop trailing zeros of the mantissa into the exponent, and leading zeros.
        var last = mantissaEnd - 1
        while last >= digitsStart && (bytes[last] == UInt8(ascii: "0") || bytes[last] == UInt8(ascii: ".")) {
            if bytes[last] == UInt8(ascii: "0") { exponent += 1 }
            last -= 1
        }
        while digitsStart <= last && (bytes[digitsStart] == UInt8(ascii: "0") || bytes[digitsStart] == UInt8(ascii: ".")) {
            digitsStart += 1
        }
        if digitsStart > last { return .value(negative: negative, magnitude: 0) }
        // The trailing-zero loop counted zeros left of the point as well; that is right: each such
        // zero multiplies by ten. Zeros right of the point were counted in fractionDigits.
        if exponent < 0 { return .notInteger }
        var magnitude: UInt64 = 0
        for index in digitsStart...last where bytes[index] != UInt8(ascii: ".") {
            let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return .outOfRange }
            magnitude = sum
        }
        for _ in 0..<exponent {
            let (times, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            if overflow { return .outOfRange }
            magnitude = times
        }
        return .value(negative: negative, magnitude: magnitude)
    }

    /// The double a well-formed JSON number denotes (infinite when it is too large).
    static func double(_ bytes: UnsafeRawBufferPointer) -> Double {
        // Short numbers fit a small string, which needs no allocation.
        Double(String(decoding: bytes, as: UTF8.self)) ?? .nan
    }
}
