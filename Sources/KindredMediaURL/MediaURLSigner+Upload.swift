/// Signed upload URLs: the profile service signs one per CreateUploadUrl, the gateway's media port takes a `PUT`
/// of the photo's bytes there and hands it to profile's UploadPhoto, which checks the signature again. A URL is
/// `<base>/upload/v1/<member id>/<upload id>/<position>?exp=<unix s>&sig=<s>`, signed like a media URL with the same
/// key: it binds the member, the insert position and the upload id (the photo's idempotency key), so whoever holds
/// it can store at most that one photo on that one profile, until it expires.
extension MediaURLSigner {
    /// The parts of an upload path.
    public struct UploadPath: Sendable, Hashable {
        public var userID: String
        /// The photo's idempotency key: a retried PUT answers the photo the first one stored.
        public var uploadID: String
        /// Where the photo goes, 0-based (past the end appends).
        public var position: Int32

        public init(userID: String, uploadID: String, position: Int32) {
            self.userID = userID
            self.uploadID = uploadID
            self.position = position
        }

        public var text: String { "/upload/v1/\(self.userID)/\(self.uploadID)/\(self.position)" }

        /// Parses `text` (no query); nil unless it is exactly an upload path: two lowercase UUIDs and a position
        /// 0...999 written without leading zeros.
        public init?(_ text: some StringProtocol) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 6, parts[0].isEmpty, parts[1] == "upload", parts[2] == "v1",
                Self.isLowercaseUUID(parts[3]), Self.isLowercaseUUID(parts[4]),
                let position = Int32(parts[5]), (0...999).contains(position), "\(position)" == parts[5]
            else { return nil }
            self.init(userID: String(parts[3]), uploadID: String(parts[4]), position: position)
        }

        /// Whether a request target's path is an upload path at all (a PUT anywhere else is refused with 405).
        public static func owns(_ target: some StringProtocol) -> Bool { target.hasPrefix("/upload/v1/") }

        private static func isLowercaseUUID(_ text: some StringProtocol) -> Bool {
            text.utf8.count == 36
                && text.utf8.enumerated().allSatisfy { index, byte in
                    [8, 13, 18, 23].contains(index) ? byte == 45 : (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102)
                }
        }
    }

    /// The path and query of a signed upload URL valid until `expires` (unix seconds; not rounded: every upload
    /// URL is new).
    public func sign(_ path: UploadPath, expires: Int64) -> String {
        self.signTarget(path.text, expires: expires)
    }

    /// The upload path of a request target if its signature is valid and it has not expired; nil otherwise.
    public func verifyUpload(_ target: String, now: Int64) -> (path: UploadPath, expires: Int64)? {
        guard let (path, expires) = self.verifiedTarget(target, now: now), let upload = UploadPath(path),
            upload.text == path
        else { return nil }
        return (upload, expires)
    }
}
