import KindredServiceKit

/// Auth's page tokens are the service kit's signed, scoped, expiring ones.
typealias PageToken = KindredServiceKit.PageToken
