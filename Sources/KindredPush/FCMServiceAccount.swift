#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredOpenSSL

/// A Google service account's JSON key: who signs the token request, with which key, for which project.
struct FCMServiceAccount: Sendable {
    let projectID: String
    let clientEmail: String
    let privateKeyID: String?
    let tokenURI: String
    let privateKey: RSAPrivateKey

    private struct File: Decodable {
        let type: String?
        let project_id: String
        let private_key_id: String?
        let private_key: String
        let client_email: String
        let token_uri: String?
    }

    /// Reads and checks the key file. Errors name the file and the missing part, never the key.
    init(file path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PushConfigurationError("cannot read the FCM service-account file \(path)")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw PushConfigurationError(
                "\(path) is not a service-account key (needs project_id, private_key, client_email)"
            )
        }
        guard file.type == nil || file.type == "service_account" else {
            throw PushConfigurationError("\(path) is not of type service_account")
        }
        do {
            self.privateKey = try RSAPrivateKey(pemRepresentation: file.private_key)
        } catch {
            throw PushConfigurationError("the private_key of \(path) is not an RSA PEM key")
        }
        self.projectID = file.project_id
        self.clientEmail = file.client_email
        self.privateKeyID = file.private_key_id
        self.tokenURI = file.token_uri ?? "https://oauth2.googleapis.com/token"
    }
}
