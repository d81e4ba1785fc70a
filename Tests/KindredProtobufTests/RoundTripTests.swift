import KindredProto
import KindredProtobuf
import Testing

private typealias Scalars = Prototest.V1.Scalars
private typealias Repeated = Prototest.V1.Repeated
private typealias Color = Prototest.V1.Color

@Suite struct RoundTripTests {
    private func roundTrip<M: ProtoMessage>(_ message: M) throws -> M {
        try M(serializedBytes: message.serializedBytes())
    }

    @Test func echoRequestBytes() throws {
        var request = Kindred.Testing.V1.EchoRequest()
        request.message = "hi"
        request.payload = [1, 2]
        request.failWithCode = 5
        let bytes = try request.serializedBytes()
        #expect(bytes == [0x0a, 0x02, 0x68, 0x69, 0x12, 0x02, 0x01, 0x02, 0x18, 0x05])
        #expect(request.serializedSize == bytes.count)
        #expect(try Kindred.Testing.V1.EchoRequest(serializedBytes: bytes) == request)
    }
}

@Suite struct NegativeZeroTests {
    @Test func negativeZeroIsWritten() throws {
        var scalars = Prototest.V1.Scalars()
        scalars.floatValue = -0.0
        scalars.doubleValue = -0.0
        let bytes = try scalars.serializedBytes()
        #expect(bytes == [0x5d, 0, 0, 0, 0x80, 0x61, 0, 0, 0, 0, 0, 0, 0, 0x80])
        let decoded = try Prototest.V1.Scalars(serializedBytes: bytes)
        #expect(decoded.floatValue.sign == .minus && decoded.doubleValue.sign == .minus)
        scalars.floatValue = 0
        scalars.doubleValue = 0
        #expect(try scalars.serializedBytes() == [])
    }
}
