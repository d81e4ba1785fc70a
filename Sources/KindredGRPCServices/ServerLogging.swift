import ArgumentParser
import Foundation
import Logging

/// Log setup shared by every server: `KINDRED_LOG_LEVEL` (trace, debug, info, notice, warning, error, critical;
/// default info) and `KINDRED_LOG_FORMAT` (`text`, default, or `json`: one JSON object per line on stderr with
/// `ts`, `level`, `logger`, `msg` and the metadata, for log shippers).
public enum ServerLogging {
    public enum Format: String, Sendable { case text, json }

    /// Bootstraps swift-log once per process and returns the server's logger.
    public static func bootstrap(
        label: String,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        level override: Logger.Level? = nil
    ) throws -> Logger {
        let reader = EnvironmentReader(environment)
        let level =
            try override
            ?? reader.value("KINDRED_LOG_LEVEL", default: Logger.Level.info, problem: "must be trace, debug, info, notice, warning, error or critical") {
                Logger.Level(rawValue: $0.lowercased())
            }
        let format = try reader.value("KINDRED_LOG_FORMAT", default: Format.text, problem: "must be text or json") {
            Format(rawValue: $0.lowercased())
        }
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        }
        return Logger(label: label)
    }
}

/// The `--log-level` option every server command takes (over `KINDRED_LOG_LEVEL`).
public struct ServerLoggingOptions: ParsableArguments {
    @Option(help: "Log level (trace, debug, info, notice, warning, error); default KINDRED_LOG_LEVEL or info.")
    public var logLevel: String?

    public init() {}

    public func bootstrap(label: String) throws -> Logger {
        try ServerLogging.bootstrap(label: label, level: self.logLevel.flatMap { Logger.Level(rawValue: $0) })
    }
}

/// Writes each record as one JSON line on stderr. Values are strings (metadata is rendered the way swift-log
/// renders it); keys are sorted so lines diff well.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void

    public init(label: String, write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = self.metadata
        if let provided = self.metadataProvider?.get() { fields.merge(provided) { _, new in new } }
        if let extra = event.metadata { fields.merge(extra) { _, new in new } }
        var line = "{\"ts\":\(Self.quote(Self.timestamp())),\"level\":\(Self.quote(event.level.rawValue))"
        line += ",\"logger\":\(Self.quote(self.label)),\"msg\":\(Self.quote(event.message.description))"
        for (key, value) in fields.sorted(by: { $0.key < $1.key })
        where !["ts", "level", "logger", "msg"].contains(key) {
            line += ",\(Self.quote(key)):\(Self.quote(value.description))"
        }
        line += "}\n"
        self.write(line)
    }

    public static let standardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// RFC 3339 UTC with milliseconds.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = now.tv_nsec / 1_000_000
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
