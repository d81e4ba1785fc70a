import Testing

@testable import KindredCLI
