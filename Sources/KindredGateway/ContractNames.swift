import KindredProto

// The generated contract namespaces under one short name each, used across the gateway's files.

/// The public API the gateway serves (`proto/kindred/api/v1`).
typealias Api = Kindred.Api.V1
/// The services behind the gateway (`proto/kindred/<service>/v1`).
typealias AuthApi = Kindred.Auth.V1
typealias ProfileApi = Kindred.Profile.V1
typealias DiscoveryApi = Kindred.Discovery.V1
typealias MatchApi = Kindred.Match.V1
typealias ChatApi = Kindred.Chat.V1
typealias NotifyApi = Kindred.Notify.V1
