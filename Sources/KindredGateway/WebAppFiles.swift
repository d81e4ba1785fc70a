import Foundation
import KindredOpenSSL
import NIOHTTP1

/// The web app's static files (`web/`), served by the media port under `/app/`: plain HTML, CSS and JavaScript
/// modules, read once when the gateway starts. A request is answered only from this table, so no path a client
/// sends can reach a file outside the folder (`..`, encoded slashes lead nowhere; symbolic links and dot files are
/// not read).
///
/// Every answer carries a strong `ETag` (SHA-256 of the bytes; `If-None-Match` → 304) and `Cache-Control:
/// no-cache` (browsers keep the files but ask each time, so a new deployment shows at once: the app has no
/// hashed file names), `X-Content-Type-Options: nosniff` and a content security policy that lets the page load
/// only its own files and call only the gateway's API.
struct WebAppFiles: Sendable {
    struct File: Sendable {
        var contentType: String
        var body: [UInt8]
        var etag: String
    }

    /// Request path (`/app/index.html`) → file.
    let files: [String: File]
    /// The security headers of every answer.
    let headers: [(String, String)]

    /// Content types by file extension; other files in the folder are not served.
    static let contentTypes = [
        "html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
        "json": "application/json", "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon",
        "webmanifest": "application/manifest+json", "txt": "text/plain; charset=utf-8",
    ]
    /// Files bigger than this are left out (the app is a few small files).
    static let maxFileBytes = 2 << 20

    /// Reads every regular file with a known extension under `root`, and `config.json` telling the app where the
    /// API is: `apiURL` (the gateway's public URL; empty: the page's host with `apiPort`).
    init(root: String, apiURL: String?, apiPort: Int) throws {
        let base = URL(fileURLWithPath: root, isDirectory: true).standardizedFileURL.resolvingSymlinksInPath()
        guard let walker = FileManager.default.enumerator(
            at: base, includingPropertiesForKeys: [.isRegularFileKey, .isSymbolicLinkKey, .fileSizeKey],
            options: [.skipsHiddenFiles])
        else { throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: root]) }
        var files: [String: File] = [:]
        for case let url as URL in walker {
            let values = try url.resourceValues(forKeys: [.isRegularFileKey, .isSymbolicLinkKey, .fileSizeKey])
            // Links are left out: a link in the folder must not publish what it points at.
            guard values.isRegularFile == true, values.isSymbolicLink != true,
                (values.fileSize ?? 0) <= Self.maxFileBytes,
                let type = Self.contentTypes[url.pathExtension.lowercased()]
            else { continue }
            let relative = url.standardizedFileURL.path.dropFirst(base.path.count)
            guard relative.hasPrefix("/") else { continue }
            files["/app" + relative] = Self.file(contentType: type, body: Array(try Data(contentsOf: url)))
        }
        var config: [String: Any] = ["apiPort": apiPort]
        if let apiURL { config["apiURL"] = apiURL }
        let json = try JSONSerialization.data(withJSONObject: config, options: [.sortedKeys])
        files["/app/config.json"] = Self.file(contentType: "application/json", body: Array(json))
        self.files = files
        let connect = apiURL.map { "'self' \($0)" } ?? "'self' http: https:"
        self.headers = [
            ("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer"),
            (
                "content-security-policy",
                "default-src 'self'; connect-src \(connect); img-src 'self' data: blob: http: https:; "
                    + "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
            ),
        ]
    }

    private static func file(contentType: String, body: [UInt8]) -> File {
        let hex = SHA256.hash(body).prefix(16).map { String(format: "%02x", $0) }.joined()
        return File(contentType: contentType, body: body, etag: "\"\(hex)\"")
    }

    /// Whether the media port should answer `target` from here rather than as a signed photo URL.
    static func owns(_ target: String) -> Bool {
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        return path == "/" || path == "/app" || path.hasPrefix("/app/")
    }

    /// The answer to a GET or HEAD of `target` (`owns(target)` is true).
    func answer(target: String, ifNoneMatch: String?) -> MediaServer.Answer {
        var path = String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        if path == "/" || path == "/app" {
            return MediaServer.Answer(
                status: .found, headers: [("location", "/app/")] + self.headers)
        }
        if path.hasSuffix("/") { path += "index.html" }
        guard let file = self.files[path] else {
            return MediaServer.Answer(status: .notFound, headers: self.headers, body: Array("not found\n".utf8))
        }
        var headers = [("etag", file.etag), ("cache-control", "no-cache")] + self.headers
        if let ifNoneMatch, ifNoneMatch.split(separator: ",").contains(where: {
            $0.trimmingCharacters(in: .whitespaces) == file.etag || $0.trimmingCharacters(in: .whitespaces) == "*"
        }) {
            return MediaServer.Answer(status: .notModified, headers: headers)
        }
        headers.append(("content-type", file.contentType))
        return MediaServer.Answer(status: .ok, headers: headers, body: file.body)
    }
}
