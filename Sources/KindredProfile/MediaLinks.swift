import Foundation
import KindredMediaURL
import KindredProto
import KindredServiceKit

/// The signed URLs photos carry: `base` (the gateway's media port or a CDN in front of it, from
/// `KINDRED_PROFILE_MEDIA_BASE_URL`) + a path signed with `KINDRED_MEDIA_URL_KEY`.
struct MediaLinks: Sendable {
    let signer: MediaURLSigner
    let base: String
    /// How long an upload URL takes a PUT.
    var uploadLifetimeSeconds: Int64 = 600

    /// The photo's message with a URL per rendition, all expiring at the same (rounded) time.
    func photo(_ record: PhotoRecord, now: Int64 = Int64(Date().timeIntervalSince1970)) -> Kindred.Profile.V1.Photo {
        var photo = record.message
        let expires = self.signer.expiry(now: now)
        photo.urls = record.renditions.map { rendition in
            let path = MediaURLSigner.Path(
                photoID: record.id, version: record.version, variant: rendition.variant, format: rendition.format)
            return .with {
                $0.variant = Kindred.Common.V1.PhotoVariant(rawValue: rendition.variant)
                $0.format = rendition.format
                $0.url = self.base + self.signer.sign(path, expires: expires)
                $0.width = rendition.width
                $0.height = rendition.height
                $0.expiresUnix = expires
            }
        }
        return photo
    }
}

extension MediaLinks {
    /// A new upload URL for `userID`'s photo at `position`, with a fresh upload id.
    func upload(userID: String, position: Int32, now: Int64 = Int64(Date().timeIntervalSince1970)) throws
        -> Kindred.Profile.V1.CreateUploadUrlResponse
    {
        let path = MediaURLSigner.UploadPath(userID: userID, uploadID: try UUIDv7.generate(), position: position)
        let expires = now + self.uploadLifetimeSeconds
        return .with {
            $0.uploadUrl = self.base + self.signer.sign(path, expires: expires)
            $0.uploadId = path.uploadID
            $0.expiresUnix = expires
        }
    }
}

extension Optional where Wrapped == MediaLinks {
    /// The photo's message, with URLs when media URLs are configured.
    func photo(_ record: PhotoRecord) -> Kindred.Profile.V1.Photo {
        self.map { $0.photo(record) } ?? record.message
    }
}
