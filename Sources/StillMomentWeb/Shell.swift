// The web app's shell: hand-written HTML, CSS and JavaScript in Shell/, embedded in the
// binary by SwiftPM (no build step, nothing fetched from elsewhere), served with an ETag
// so a phone revalidates instead of downloading again.
import StillMomentCore

enum Shell {
    struct File {
        let type: String
        let bytes: [UInt8]
        let etag: String
    }

    static let files: [String: File] = {
        func f(_ type: String, _ bytes: [UInt8]) -> File {
            return File(type: type, bytes: bytes, etag: "\"" + SHA256.hex(bytes: bytes).prefix(16) + "\"")
        }
        return [
            "/": f("text/html; charset=utf-8", PackageResources.index_html),
            "/app.js": f("text/javascript; charset=utf-8", PackageResources.app_js),
            "/app.css": f("text/css; charset=utf-8", PackageResources.app_css),
            "/sw.js": f("text/javascript; charset=utf-8", PackageResources.sw_js),
            "/manifest.webmanifest": f("application/manifest+json", PackageResources.manifest_webmanifest),
            "/icon.svg": f("image/svg+xml", PackageResources.icon_svg),
        ]
    }()

    /// The shell's size in bytes (all files).
    static var totalBytes: Int { files.values.reduce(0) { $0 + $1.bytes.count } }

    static func file(_ r: HTTPRequest) -> Response {
        let path = r.path == "/index.html" ? "/" : r.path
        guard let file = files[path] else {
            return Response(status: 404, contentType: "text/plain; charset=utf-8", body: Array("not found\n".utf8))
        }
        let headers = [("Cache-Control", "no-cache"), ("ETag", file.etag)]
        if r.header("if-none-match") == file.etag { return Response(status: 304, contentType: file.type, headers: headers) }
        return Response(status: 200, contentType: file.type, body: r.method == "HEAD" ? [] : file.bytes, headers: headers)
    }
}
