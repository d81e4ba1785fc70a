/// A PostgreSQL type OID, as bound parameters declare and result columns report.
public struct PostgresDataType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// OID 0: the server infers the parameter's type from where it is used, as for a quoted literal.
    public static let unspecified = PostgresDataType(rawValue: 0)
    public static let bool = PostgresDataType(rawValue: 16)
    public static let bytea = PostgresDataType(rawValue: 17)
    public static let char = PostgresDataType(rawValue: 18)
    public static let name = PostgresDataType(rawValue: 19)
    public static let int8 = PostgresDataType(rawValue: 20)
    public static let int2 = PostgresDataType(rawValue: 21)
    public static let int4 = PostgresDataType(rawValue: 23)
    public static let text = PostgresDataType(rawValue: 25)
    public static let oid = PostgresDataType(rawValue: 26)
    public static let json = PostgresDataType(rawValue: 114)
    public static let xml = PostgresDataType(rawValue: 142)
    public static let float4 = PostgresDataType(rawValue: 700)
    public static let float8 = PostgresDataType(rawValue: 701)
    public static let unknown = PostgresDataType(rawValue: 705)
    public static let boolArray = PostgresDataType(rawValue: 1000)
    public static let byteaArray = PostgresDataType(rawValue: 1001)
    public static let nameArray = PostgresDataType(rawValue: 1003)
    public static let int2Array = PostgresDataType(rawValue: 1005)
    public static let int4Array = PostgresDataType(rawValue: 1007)
    public static let textArray = PostgresDataType(rawValue: 1009)
    public static let varcharArray = PostgresDataType(rawValue: 1015)
    public static let int8Array = PostgresDataType(rawValue: 1016)
    public static let float4Array = PostgresDataType(rawValue: 1021)
    public static let float8Array = PostgresDataType(rawValue: 1022)
    public static let bpchar = PostgresDataType(rawValue: 1042)
    public static let varchar = PostgresDataType(rawValue: 1043)
    public static let date = PostgresDataType(rawValue: 1082)
    public static let timestamp = PostgresDataType(rawValue: 1114)
    public static let timestampArray = PostgresDataType(rawValue: 1115)
    public static let timestamptz = PostgresDataType(rawValue: 1184)
    public static let timestamptzArray = PostgresDataType(rawValue: 1185)
    public static let numeric = PostgresDataType(rawValue: 1700)
    public static let uuid = PostgresDataType(rawValue: 2950)
    public static let uuidArray = PostgresDataType(rawValue: 2951)
    public static let jsonb = PostgresDataType(rawValue: 3802)

    /// Types created by `CREATE TYPE` or extensions (enums, citext, …) get OIDs from 16384 up.
    public var isUserDefined: Bool { self.rawValue >= 16384 }

    public var description: String {
        switch self {
        case .unspecified: "unspecified"
        case .bool: "bool"
        case .bytea: "bytea"
        case .char: "char"
        case .name: "name"
        case .int8: "int8"
        case .int2: "int2"
        case .int4: "int4"
        case .text: "text"
        case .oid: "oid"
        case .json: "json"
        case .xml: "xml"
        case .float4: "float4"
        case .float8: "float8"
        case .unknown: "unknown"
        case .bpchar: "bpchar"
        case .varchar: "varchar"
        case .date: "date"
        case .timestamp: "timestamp"
        case .timestamptz: "timestamptz"
        case .numeric: "numeric"
        case .uuid: "uuid"
        case .jsonb: "jsonb"
        case .boolArray: "bool[]"
        case .int2Array: "int2[]"
        case .int4Array: "int4[]"
        case .int8Array: "int8[]"
        case .textArray: "text[]"
        case .varcharArray: "varchar[]"
        case .float8Array: "float8[]"
        case .timestamptzArray: "timestamptz[]"
        case .uuidArray: "uuid[]"
        default: "oid \(self.rawValue)"
        }
    }
}

/// How a bound value is sent: as text (libpq needs it NUL-terminated) or in the binary wire format.
public enum PostgresFormat: Int32, Sendable, Hashable {
    case text = 0
    case binary = 1
}
