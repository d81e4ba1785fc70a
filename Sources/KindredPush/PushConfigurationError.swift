import KindredGRPC

/// A provider setting that cannot work (a malformed URL, a key file that is not a key). The message names the
/// setting or file, never a key.
public struct PushConfigurationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }

    /// The origin of a URL setting, or an error naming the setting.
    static func origin(_ text: String, setting: String) throws -> HTTPSOrigin {
        do { return try HTTPSOrigin(text) } catch { throw PushConfigurationError("\(setting) \(error)") }
    }

    /// The origin and path of a URL setting, or an error naming the setting.
    static func split(_ text: String, setting: String) throws -> (origin: HTTPSOrigin, path: String) {
        do { return try HTTPSOrigin.split(text) } catch { throw PushConfigurationError("\(setting) \(error)") }
    }
}
