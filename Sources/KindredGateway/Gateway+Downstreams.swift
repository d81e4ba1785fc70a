import KindredGRPC

/// The services behind the gateway that a cluster may leave out: each route asks for the one it needs and answers
/// UNIMPLEMENTED (NOT_DEPLOYED) when this cluster does not run it. Auth and profile are always there.
extension Gateway {
    /// The match service, or UNIMPLEMENTED (NOT_DEPLOYED) when this cluster does not run it.
    func requireMatch() throws(RPCError) -> Downstream {
        guard let match = self.match else { throw GatewayErrors.notDeployed("Matching") }
        return match
    }

    /// The discovery service (decks, top picks, search), or UNIMPLEMENTED (NOT_DEPLOYED).
    func requireDiscovery() throws(RPCError) -> Downstream {
        guard let discovery = self.discovery else { throw GatewayErrors.notDeployed("The deck") }
        return discovery
    }

    /// The chat downstream; UNIMPLEMENTED (NOT_DEPLOYED) when this cluster runs no chat service.
    func requireChat() throws(RPCError) -> Downstream {
        guard let chat = self.chat else { throw GatewayErrors.notDeployed("Chat") }
        return chat
    }

    /// The notify downstream; UNIMPLEMENTED (NOT_DEPLOYED) when this cluster runs no notify service.
    func requireNotify() throws(RPCError) -> Downstream {
        guard let notify = self.notify else { throw GatewayErrors.notDeployed("Notifications") }
        return notify
    }
}
