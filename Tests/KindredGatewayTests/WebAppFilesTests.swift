import Foundation
import Testing

@testable import KindredGateway

/// The web app's static files without a server: what is in the table, what a path can reach, caching and types.
@Suite("Web app files")
struct WebAppFilesTests {
    /// A folder with an app, a nested module, a file of an unserved type, a dot file and a link out of it.
    private static func folder() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("webapp-\(UUID().uuidString)")
        let outside = root.appendingPathComponent("../webapp-outside-\(UUID().uuidString).txt").standardizedFileURL
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("js"), withIntermediateDirectories: true)
        try Data("<!doctype html>".utf8).write(to: root.appendingPathComponent("index.html"))
        try Data("export {}".utf8).write(to: root.appendingPathComponent("js/main.js"))
        try Data("body{}".utf8).write(to: root.appendingPathComponent("app.css"))
        try Data("secret".utf8).write(to: root.appendingPathComponent("notes.md"))
        try Data("secret".utf8).write(to: root.appendingPathComponent(".env.js"))
        try Data("outside".utf8).write(to: outside)
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("link.txt"), withDestinationURL: outside)
        return root
    }

    @Test("the table holds the app's files by request path, and config.json")
    func table() throws {
        let files = try WebAppFiles(root: Self.folder().path, apiURL: nil, apiPort: 50050)
        #expect(Set(files.files.keys) == ["/app/index.html", "/app/js/main.js", "/app/app.css", "/app/config.json"])
        #expect(files.files["/app/js/main.js"]?.contentType == "text/javascript; charset=utf-8")
        #expect(String(decoding: files.files["/app/config.json"]!.body, as: UTF8.self) == #"{"apiPort":50050}"#)
    }

    @Test(
        "no path reaches outside the table",
        arguments: [
            "/app/../notes.md", "/app/%2e%2e/notes.md", "/app/notes.md", "/app/.env.js", "/app/link.txt",
            "/app//index.html", "/app/js/../index.html", "/app/js", "/app/index.html/",
        ])
    func traversal(target: String) throws {
        let files = try WebAppFiles(root: Self.folder().path, apiURL: nil, apiPort: 50050)
        #expect(files.answer(target: target, ifNoneMatch: nil).status == .notFound)
    }

    @Test("an ETag answers 304; the root and /app redirect; queries are ignored")
    func caching() throws {
        let files = try WebAppFiles(root: Self.folder().path, apiURL: "https://api.example.com", apiPort: 443)
        let first = files.answer(target: "/app/?v=2", ifNoneMatch: nil)
        #expect(first.status == .ok)
        #expect(String(decoding: first.body, as: UTF8.self) == "<!doctype html>")
        let tag = try #require(first.headers.first { $0.0 == "etag" }?.1)
        #expect(first.headers.contains { $0 == ("cache-control", "no-cache") })
        #expect(
            first.headers.contains { $0.0 == "content-security-policy" && $0.1.contains("https://api.example.com") })
        #expect(files.answer(target: "/app/index.html", ifNoneMatch: "\"x\", \(tag)").status == .notModified)
        #expect(files.answer(target: "/app/index.html", ifNoneMatch: "\"other\"").status == .ok)
        for target in ["/", "/app", "/?a=b"] {
            let answer = files.answer(target: target, ifNoneMatch: nil)
            #expect(answer.status == .found && answer.headers.contains { $0 == ("location", "/app/") })
        }
        #expect(WebAppFiles.owns("/app/x") && WebAppFiles.owns("/") && !WebAppFiles.owns("/media/v1/p/1/card.jpeg"))
        #expect(!WebAppFiles.owns("/apple"))
    }
}
