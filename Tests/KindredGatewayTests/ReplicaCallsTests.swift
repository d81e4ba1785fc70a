import KindredGRPC
import Testing

@testable import KindredGateway

@Suite("Calls to services with several replicas: which may run twice, when a chat stream resumes")
struct ReplicaCallsTests {
    @Test("reads and writes idempotent by their key are idempotent; other writes are not")
    func idempotentMethods() {
        for method in ["GetDeck", "GetProfiles", "ListThreads", "History", "CheckCandidates", "FilterUnseen", "Swipe",
            "SendMessage", "MarkRead", "MarkDelivered"]
        {
            #expect(Downstream.isIdempotent(method), "\(method)")
        }
        for method in ["CreateProfile", "UpdateProfile", "Unmatch", "Block", "SignUp", "SignIn", "DeleteAccount",
            "Undo", "UndoPass", "OpenThread", "ReportUser"]
        {
            #expect(!Downstream.isIdempotent(method), "\(method)")
        }
    }

    @Test("a chat stream resumes when its replica is lost or drains, not on the subscriber's own errors")
    func chatReplicaLost() {
        #expect(Gateway.chatReplicaLost(RPCError(.unavailable, "The connection to the server was lost")))
        #expect(Gateway.chatReplicaLost(GatewayErrors.make(.unavailable, "draining", reason: "SERVER_DRAINING")))
        #expect(Gateway.chatReplicaLost(GatewayErrors.make(.unavailable, "busy", reason: "UNAVAILABLE")))
        #expect(!Gateway.chatReplicaLost(GatewayErrors.make(.unavailable, "slow", reason: "SUBSCRIBER_TOO_SLOW")))
        #expect(!Gateway.chatReplicaLost(RPCError(.permissionDenied, "ended session")))
        #expect(!Gateway.chatReplicaLost(RPCError(.cancelled, "cancelled")))
    }
}
