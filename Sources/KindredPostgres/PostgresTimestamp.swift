#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// An instant with microsecond precision, as `timestamptz` stores it, counted from the Unix epoch.
///
/// Binds as `timestamptz`; decodes from `timestamptz` and from `timestamp` (read as UTC). PostgreSQL's
/// `infinity` and `-infinity` are ``infinity`` and ``negativeInfinity``.
public struct PostgresTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var microsecondsSinceEpoch: Int64

    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    public init(millisecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = millisecondsSinceEpoch * 1000
    }

    /// Milliseconds since the epoch, rounded down (the `*_unix_ms` fields of the protos).
    public var millisecondsSinceEpoch: Int64 {
        floorDivide(self.microsecondsSinceEpoch, 1000).quotient
    }

    /// The current wall-clock time.
    public static var now: PostgresTimestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return PostgresTimestamp(microsecondsSinceEpoch: Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1000)
    }

    public static let infinity = PostgresTimestamp(microsecondsSinceEpoch: .max)
    public static let negativeInfinity = PostgresTimestamp(microsecondsSinceEpoch: .min)

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    /// ISO 8601 in UTC with microseconds, e.g. `2024-02-29T13:45:00.000001Z`.
    public var description: String {
        if self == .infinity { return "infinity" }
        if self == .negativeInfinity { return "-infinity" }
        let (days, micros) = floorDivide(self.microsecondsSinceEpoch, 86_400_000_000)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        let seconds = micros / 1_000_000
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(seconds / 3600, 2)):"
            + "\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2)).\(pad(micros % 1_000_000, 6))Z"
    }

    /// Microseconds between the Unix epoch and PostgreSQL's epoch, 2000-01-01 00:00 UTC.
    static let postgresEpochOffset: Int64 = 946_684_800_000_000
}

extension PostgresTimestamp: PostgresEncodable, PostgresDecodable, PostgresBinaryArrayElement {
    public static var postgresDataType: PostgresDataType { .timestamptz }
    public static var postgresArrayDataType: PostgresDataType { .timestamptzArray }

    public func encode(into buffer: inout [UInt8]) {
        switch self {
        case .infinity, .negativeInfinity: buffer.appendBigEndian(self.microsecondsSinceEpoch)
        default: buffer.appendBigEndian(self.microsecondsSinceEpoch &- Self.postgresEpochOffset)
        }
    }

    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        guard type == .timestamptz || type == .timestamp, bytes.count == 8 else {
            throw PostgresError.typeMismatch(Self.self, type)
        }
        let value = bytes.loadBigEndian(Int64.self)
        switch value {
        case .max, .min: self.init(microsecondsSinceEpoch: value)
        default: self.init(microsecondsSinceEpoch: value &+ Self.postgresEpochOffset)
        }
    }
}

private func floorDivide(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
    let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
    return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
private func civilDate(daysSinceEpoch: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = daysSinceEpoch + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
}
