import KindredProto
import KindredProtobuf

extension ProtoJSON {
    /// The paths (`/kindred.api.v1.ProfileService/GetMyProfile`) of the unary methods the protos mark
    /// `option idempotency_level = NO_SIDE_EFFECTS;`, read from the descriptors the code generator embeds: the
    /// calls the Connect protocol may take as an HTTP GET (cacheable, safe to retry, no CSRF-relevant effect).
    public static func sideEffectFreeMethods(in files: [ProtoFileDescriptor] = ProtoRegistry.fileDescriptors.files)
        -> Set<String>
    {
        var paths: Set<String> = []
        for file in files { paths.formUnion(DescriptorReader.sideEffectFreeMethods(file: file.serializedBytes)) }
        return paths
    }
}
