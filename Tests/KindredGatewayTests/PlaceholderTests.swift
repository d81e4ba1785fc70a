import Testing

@testable import KindredGateway
