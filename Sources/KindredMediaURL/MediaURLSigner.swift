import KindredOpenSSL

/// Signed, expiring media URLs: the profile service signs them, the gateway's media port checks them (both hold
/// `KINDRED_MEDIA_URL_KEY`). A URL is `<base>/media/v1/<photo id>/<version>/<variant>.<format>?exp=<unix s>&sig=<s>`
/// where `s` is base64url(HMAC-SHA256(key, path + "\n" + exp)); no token, cookie or header is needed to fetch it,
/// so stock image loaders and CDNs can.
public struct MediaURLSigner: Sendable {
    private let key: [UInt8]
    /// How long a URL stays valid at least. Short, because a URL cannot be taken back: whoever holds it (a member
    /// blocked since, a scraper) can fetch the photo until it expires. Removal, deletion and deactivation stop it
    /// sooner at the origin (profile's GetPhoto answers NOT_FOUND, the media port 404).
    public let lifetimeSeconds: Int64
    /// Expiries are rounded up to this step, so the same photo gets the same URL for a while (CDN hits): a URL is
    /// valid between `lifetimeSeconds` and `lifetimeSeconds + stepSeconds`.
    public let stepSeconds: Int64

    /// `key`: at least 32 bytes. Defaults: valid 15 to 20 minutes, the same URL for 5 minutes.
    public init?(key: [UInt8], lifetimeSeconds: Int64 = 900, stepSeconds: Int64 = 300) {
        guard key.count >= 32, lifetimeSeconds > 0, stepSeconds > 0 else { return nil }
        self.key = key
        self.lifetimeSeconds = lifetimeSeconds
        self.stepSeconds = stepSeconds
    }

    /// The parts of a media path.
    public struct Path: Sendable, Hashable {
        public var photoID: String
        public var version: Int64
        /// The PhotoVariant number.
        public var variant: Int32
        /// "jpeg" or "webp".
        public var format: String

        public init(photoID: String, version: Int64, variant: Int32, format: String) {
            self.photoID = photoID
            self.version = version
            self.variant = variant
            self.format = format
        }

        public var text: String { "/media/v1/\(self.photoID)/\(self.version)/\(self.variant).\(self.format)" }

        /// Parses `text` (no query); nil unless it is exactly a media path of known shape.
        public init?(_ text: some StringProtocol) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 6, parts[0].isEmpty, parts[1] == "media", parts[2] == "v1",
                parts[3].utf8.count == 36, parts[3].utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || $0 == 45 }),
                let version = Int64(parts[4]), version > 0
            else { return nil }
            let file = parts[5].split(separator: ".")
            guard file.count == 2, let variant = Int32(file[0]), (1...4).contains(variant), file[1] == "jpeg" || file[1] == "webp"
            else { return nil }
            self.init(photoID: String(parts[3]), version: version, variant: variant, format: String(file[1]))
        }
    }

    /// The expiry a URL made at `now` gets: at least `lifetimeSeconds` ahead, rounded up to the step.
    public func expiry(now: Int64) -> Int64 {
        let earliest = now + self.lifetimeSeconds
        return (earliest + self.stepSeconds - 1) / self.stepSeconds * self.stepSeconds
    }

    private func signature(_ path: String, _ expires: Int64) -> String {
        Base64URL.encode(HMACSHA256.authenticationCode(for: Array("\(path)\n\(expires)".utf8), key: self.key))
    }

    /// The path and query of a signed URL (prefix it with the public base URL).
    public func sign(_ path: Path, expires: Int64) -> String {
        self.signTarget(path.text, expires: expires)
    }

    /// The media path of a request target if its signature is valid and it has not expired; nil otherwise.
    public func verify(_ target: String, now: Int64) -> (path: Path, expires: Int64)? {
        guard let (path, expires) = self.verifiedTarget(target, now: now), let media = Path(path), media.text == path
        else { return nil }
        return (media, expires)
    }

    /// The path of `target` ("<path>?exp=<unix s>&sig=<s>", nothing else) when its signature is valid and it has
    /// not expired at `now`. The path's own parser must still check its shape.
    func verifiedTarget(_ target: String, now: Int64) -> (path: Substring, expires: Int64)? {
        let pieces = target.split(separator: "?", maxSplits: 1)
        guard pieces.count == 2 else { return nil }
        var expires: Int64?
        var signature: Substring?
        for pair in pieces[1].split(separator: "&") {
            let field = pair.split(separator: "=", maxSplits: 1)
            guard field.count == 2 else { return nil }
            switch field[0] {
            case "exp" where expires == nil: expires = Int64(field[1])
            case "sig" where signature == nil: signature = field[1]
            default: return nil
            }
        }
        guard let expires, let signature, expires > now, let given = Base64URL.decode(signature) else { return nil }
        guard HMACSHA256.isValidAuthenticationCode(given, for: Array("\(pieces[0])\n\(expires)".utf8), key: self.key)
        else { return nil }
        return (pieces[0], expires)
    }

    /// `path?exp=…&sig=…` for any signed path (photo or upload): one key, one signature shape; the paths' first
    /// segments differ, so a signature made for one kind never verifies as the other.
    func signTarget(_ path: String, expires: Int64) -> String {
        "\(path)?exp=\(expires)&sig=\(self.signature(path, expires))"
    }
}
