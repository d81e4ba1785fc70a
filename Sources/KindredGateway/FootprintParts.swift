import KindredGRPC
import KindredProto

extension Gateway {
    /// Discovery's rows about a user (candidate, swipes, exclusions, model), for the admin footprint.
    func discoveryFootprintPart(_ userID: String, _ caller: Caller) -> FanOut<Api.GetUserFootprintResponse>.Part {
        guard let discovery = self.discovery else { return .init(name: "discovery", essential: false, fetch: nil) }
        return .init(name: "discovery", essential: false) {
            let response = try await discovery.call(
                DiscoveryApi.DiscoveryService.Method.getUserFootprint, .with { $0.userId = userID }, as: caller)
            return { $0.services.append(.with { $0.service = "discovery"; $0.counts = response.counts }) }
        }
    }

    /// Chat's rows about a user (threads, messages, event log, receipts), for the admin footprint.
    func chatFootprintPart(_ userID: String, _ caller: Caller) -> FanOut<Api.GetUserFootprintResponse>.Part {
        guard let chat = self.chat else { return .init(name: "chat", essential: false, fetch: nil) }
        return .init(name: "chat", essential: false) {
            let response = try await chat.call(
                ChatApi.ChatService.Method.getUserFootprint, .with { $0.userId = userID }, as: caller)
            return { $0.services.append(.with { $0.service = "chat"; $0.counts = response.counts }) }
        }
    }
}
