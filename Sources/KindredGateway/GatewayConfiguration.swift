/// Placeholder: the gateway lands in this module.
public struct GatewayConfiguration: Sendable {
    public init() {}
}
