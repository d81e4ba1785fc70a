// Measures the proto3 JSON mapping on a typical call: a deck page (GetDeckResponse, 20 cards with
// photos and attributes) and its request, next to what the binary path spends on the same messages.
//
//   kindred-protojson-bench                      ns/op of every operation (best of 5 batches)
//   kindred-protojson-bench OPERATION COUNT      runs OPERATION exactly COUNT times, for callgrind:
//       valgrind --tool=callgrind --callgrind-out-file=/dev/null kindred-protojson-bench OP 0 / OP 1000
//       and divide the difference in instructions by 1000 (Tests/Benchmarks/protojson-bench.sh does that).
import KindredProto
import KindredProtoJSON
import KindredProtobuf

typealias API = Kindred.Api.V1

func deckResponse() -> API.GetDeckResponse {
    API.GetDeckResponse.with { response in
        response.nextPageToken = "djEuZGVjay4xNzMyNjk0NDAwLjIwLjQ4Mjk0NzM5MjA"
        response.radiusKm = 25
        response.cards = (0..<20).map { index in
            API.DeckCard.with { card in
                card.topPick = index < 3
                card.sharedAttributeKeys = ["hiking", "coffee"]
                card.profile = API.ProfileCard.with { profile in
                    profile.userId = "01JDQ8ZK\(index)XG4T7M2N9P3R5S6V8W"
                    profile.displayName = "Member \(index) Müller"
                    profile.ageYears = Int32(24 + index % 15)
                    profile.gender = .init(rawValue: Int32(1 + index % 2))
                    profile.bio = "Weekend hiker, weekday coffee snob. Looking for someone to explore the city with — ☕️🏔"
                    profile.distanceKm = Int32(1 + index)
                    profile.version = 1_732_694_400_123 + Int64(index)
                    profile.interests = ["hiking", "coffee", "jazz", "board games"]
                    profile.jobTitle = "Product designer"
                    profile.city = "Berlin"
                    profile.attributes = [
                        .with { $0.key = "height_cm"; $0.value = .integerValue(170 + Int64(index)) },
                        .with { $0.key = "smoker"; $0.value = .boolValue(false) },
                        .with { $0.key = "looking_for"; $0.value = .choiceValue("relationship") },
                    ]
                    profile.photos = (0..<2).map { position in
                        API.Photo.with { photo in
                            photo.photoId = "01JDQ9A\(index)\(position)B7C8D9E0F1G2H3J4"
                            photo.position = Int32(position)
                            photo.version = 3
                            photo.width = 1080
                            photo.height = 1350
                            photo.urls = ["jpeg", "webp"].map { format in
                                API.PhotoUrl.with { url in
                                    url.variant = .init(rawValue: 1)
                                    url.format = format
                                    url.url = "https://media.example.com/p/01JDQ9A\(index)\(position)/v3/card.\(format)?exp=1732698000&sig=4f1c2a9be07d5c3e8a6b1f0d2c4e6a8b"
                                    url.width = 480
                                    url.height = 600
                                    url.expiresUnix = 1_732_698_000
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

let deckRequestJSON = Array(
    #"{"pageSize":20,"pageToken":"djEuZGVjay4xNzMyNjk0NDAwLjIwLjQ4Mjk0NzM5MjA","excludeUserIds":["01JDQ8ZK1XG4T7M2N9P3R5S6V8W","01JDQ8ZK2XG4T7M2N9P3R5S6V8W"]}"#
        .utf8)

let response = deckResponse()
let responseBytes = try response.serializedBytes()
let requestBytes = try ProtoJSON.binary(fromJSON: deckRequestJSON, of: API.GetDeckRequest.self)
let responseJSON = try ProtoJSON.json(fromBinary: responseBytes, of: API.GetDeckResponse.self)

/// Each operation returns a number that depends on its work, so that none is optimised away.
let operations: [(name: String, run: () throws -> Int)] = [
    ("response-to-json", { try ProtoJSON.json(fromBinary: responseBytes, of: API.GetDeckResponse.self).count }),
    ("response-from-json", { try ProtoJSON.binary(fromJSON: responseJSON, of: API.GetDeckResponse.self).count }),
    ("response-encode-binary", { try response.serializedBytes().count }),
    ("response-decode-binary", { try API.GetDeckResponse(serializedBytes: responseBytes).cards.count }),
    ("request-from-json", { try ProtoJSON.binary(fromJSON: deckRequestJSON, of: API.GetDeckRequest.self).count }),
    ("request-to-json", { try ProtoJSON.json(fromBinary: requestBytes, of: API.GetDeckRequest.self).count }),
    ("request-decode-binary", { try API.GetDeckRequest(serializedBytes: requestBytes).excludeUserIds.count }),
]

var sink = 0
let arguments = CommandLine.arguments
if arguments.count == 3, let operation = operations.first(where: { $0.name == arguments[1] }), let count = Int(arguments[2]) {
    // One run first, so that a run of 0 pays every one-time cost (schemas, layouts) a run of N pays.
    sink &+= try operation.run()
    for _ in 0..<count { sink &+= try operation.run() }
    print("ran \(operation.name) \(count) times (\(sink))")
} else {
    print("GetDeckResponse: \(responseBytes.count) bytes binary, \(responseJSON.count) bytes JSON")
    print("GetDeckRequest: \(requestBytes.count) bytes binary, \(deckRequestJSON.count) bytes JSON")
    for operation in operations {
        let iterations = 20_000
        for _ in 0..<iterations / 10 { sink &+= try operation.run() }
        var best = Double.infinity
        for _ in 0..<5 {
            let start = ContinuousClock.now
            for _ in 0..<iterations { sink &+= try operation.run() }
            let elapsed = ContinuousClock.now - start
            let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
            best = min(best, nanoseconds / Double(iterations))
        }
        print("\(operation.name): \(Int(best)) ns/op")
    }
    if sink == 42 { print(sink) }
}
