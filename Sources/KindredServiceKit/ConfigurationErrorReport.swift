import ArgumentParser
import Foundation
import KindredGRPCServices

/// Runs `body`; a bad setting becomes one line on stderr naming the key, and exit status 78 (EX_CONFIG).
public func reportingConfigurationErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ConfigurationError {
        FileHandle.standardError.write(Data("configuration error: \(error)\n".utf8))
        throw ExitCode(78)
    }
}
