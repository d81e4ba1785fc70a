import KindredProtobuf
import Testing

@Suite struct ProtoErrorTests {
    @Test func descriptionNamesCodeAndTypeOnly() {
        let error = ProtoError(code: .invalidUTF8, messageName: "kindred.testing.v1.EchoRequest")
        #expect(
            error.description
                == "ProtoError(invalidUTF8): a string field is not valid UTF-8 (kindred.testing.v1.EchoRequest)"
        )
        #expect(ProtoError(code: .malformed).code == .malformed)
        #expect(ProtoError.Code.tooLarge != .malformed)
    }
}
