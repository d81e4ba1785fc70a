#!/usr/bin/env python3
"""Writes the seed corpora under Tests/Fuzz/Corpus/<target>/ from real inputs made by independent implementations:
Google's protobuf (every public request message, binary and proto3 JSON), Pillow and pillow-heif (photos),
the `cryptography` package (JWTs and a JWKS document), and the replies real SMTP relays send. Each seed starts with
the choice bytes its target reads first (see each target's main.swift). Run it after adding a request message or a
target; the files are committed."""
import base64
import hashlib
import io
import json
import pathlib
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "Corpus"


CLEARED = set()


def write(target, name, data):
    """Writes one seed. A target's first seed of a run clears its folder, except the inputs that once broke a
    property (regression-*), which stay."""
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    if target not in CLEARED:
        CLEARED.add(target)
        for seed in folder.iterdir():
            if not seed.name.startswith("regression-"):
                seed.unlink()
    (folder / name).write_bytes(bytes(data))


def request_types():
    """The kindred.api.v1 request messages in the order FuzzProtobuf and FuzzProtoJSON index them."""
    registry = (ROOT / "Sources/KindredProto/ProtoRegistry.swift").read_text()
    return [m.group(1) for m in re.finditer(r"Kindred\.Api\.V1\.(\w+Request)\.self", registry)]


def is_repeated(field):
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def populate(message, depth=0):
    """Every field set to a plausible value (nested to depth 3, two elements per list, one map entry)."""
    from google.protobuf.descriptor import FieldDescriptor as F
    for field in message.DESCRIPTOR.fields:
        if field.containing_oneof is not None and field.containing_oneof.fields[0] is not field:
            continue  # one member per oneof
        def value(f):
            if f.type == F.TYPE_STRING:
                return {"email": "alice@example.com", "password": "correct horse battery"}.get(f.name, f"Alice {f.name}")
            if f.type == F.TYPE_BYTES:
                return b"\xff\xd8\xff\xe0 photo"
            if f.type == F.TYPE_BOOL:
                return True
            if f.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
                return 48.8566
            if f.type == F.TYPE_ENUM:
                return f.enum_type.values[min(1, len(f.enum_type.values) - 1)].number
            if f.type in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
                return -1234567890123
            if f.type in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32):
                return 42
            return 7  # unsigned
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            container = getattr(message, field.name)
            key = value(key_field)
            if value_field.message_type is not None:
                if depth < 3:
                    populate(container[key], depth + 1)
            else:
                container[key] = value(value_field)
        elif field.message_type is not None:
            if depth >= 3:
                continue
            if is_repeated(field):
                for _ in range(2):
                    populate(getattr(message, field.name).add(), depth + 1)
            else:
                populate(getattr(message, field.name), depth + 1)
        elif is_repeated(field):
            getattr(message, field.name).extend([value(field), value(field)])
        else:
            setattr(message, field.name, value(field))


def protobuf_seeds():
    from google.protobuf import json_format
    stubs = tempfile.mkdtemp(prefix="kindred-fuzz-seeds-")
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto/kindred").glob("*/v1/*.proto"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={stubs}", *protos],
                   check=True)
    sys.path.insert(0, stubs)
    import importlib
    modules = [importlib.import_module(f"kindred.api.v1.{p.stem}_pb2") for p in (ROOT / "proto/kindred/api/v1").glob("*.proto")]
    classes = {}
    for module in modules:
        for name in module.DESCRIPTOR.message_types_by_name:
            classes[name] = getattr(module, name)
    for index, name in enumerate(request_types()):
        full = classes[name]()
        populate(full)
        empty = classes[name]()
        for label, message in (("full", full), ("empty", empty)):
            binary = message.SerializeToString()
            write("FuzzProtobuf", f"{name}-{label}", [index] + list(binary))
            write("FuzzProtoJSON", f"{name}-{label}.bin", [2 * index + 1] + list(binary))
            text = json_format.MessageToJson(message, indent=None).encode()
            write("FuzzProtoJSON", f"{name}-{label}.json", [2 * index] + list(text))
    shutil.rmtree(stubs, True)


def framing_seeds():
    def frame(payload, flag=0):
        return bytes([flag]) + struct.pack(">I", len(payload)) + payload
    hello = b"\x0a\x05hello"
    write("FuzzGRPCFraming", "one-message", [4] + [7] * 8 + list(frame(hello)))
    write("FuzzGRPCFraming", "three-messages-read-late", [3] + [0x05, 0x41, 0xC2, 0, 9, 0x40, 1, 2]
          + list(frame(hello) + frame(b"") + frame(b"x" * 200)))
    write("FuzzGRPCFraming", "partial", [2] + [1] * 8 + list(frame(hello)[:7]))
    write("FuzzGRPCFraming", "over-limit", [2] + [22] * 8 + list(frame(b"y" * 40)))
    write("FuzzGRPCFraming", "compressed", [4] + [3] * 8 + list(frame(hello, flag=1)))


def photo_seeds():
    from PIL import Image
    import pillow_heif
    pillow_heif.register_heif_opener()
    image = Image.new("RGB", (8, 6), (200, 60, 20))
    for fmt, index, extra in (("JPEG", 0, {}), ("PNG", 0, {}), ("WEBP", 0, {}), ("HEIF", 0, {}),
                              ("JPEG", 0, {"progressive": True}), ("PNG", 0, {"optimize": True})):
        out = io.BytesIO()
        image.save(out, fmt, **extra)
        name = fmt.lower() + ("-progressive" if extra.get("progressive") else "") + ("-optimized" if extra.get("optimize") else "")
        write("FuzzPhotoContainer", name, [index] + list(out.getvalue()))
    # A JPEG with padding after EOI, and one with a ZIP appended (refused as trailing data).
    out = io.BytesIO()
    image.save(out, "JPEG")
    write("FuzzPhotoContainer", "jpeg-padded", [0] + list(out.getvalue() + b"\x00\xff\x00"))
    write("FuzzPhotoContainer", "jpeg-polyglot", [0] + list(out.getvalue() + b"PK\x03\x04polyglot"))


def jwt_seeds():
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def token(header, claims, sign):
        signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
        return f"{signing_input}.{b64(sign(signing_input.encode()))}"

    claims = {"iss": "kindred-auth", "sub": "0190f1de-5c6e-7a1b-9c2d-3e4f5a6b7c8d", "aud": "kindred",
              "exp": 1800000900, "iat": 1800000000, "nbf": 1800000000, "jti": "t1", "sid": "s1", "roles": ["user"]}
    other = ed25519.Ed25519PrivateKey.from_private_bytes(bytes([9] * 32))
    access = token({"alg": "EdDSA", "kid": "k1", "typ": "JWT"}, claims, other.sign)
    write("FuzzJWT", "access-token-other-key", [0] + list(access.encode()))
    write("FuzzJWT", "alg-none", [0] + list(token({"alg": "none", "typ": "JWT"}, claims, lambda _: b"").encode()))
    write("FuzzJWT", "edit-real-token", [1, 0, 0, 40, 0x41, 0])
    write("FuzzJWT", "header-hs256", [2] + list(json.dumps({"alg": "HS256", "kid": "k1"}).encode()))
    write("FuzzJWT", "header-eddsa-other-kid", [2] + list(json.dumps({"alg": "EdDSA", "kid": "k2"}).encode()))
    p256 = ec.derive_private_key(12345, ec.SECP256R1())
    def es256(data):
        r, s = decode_dss_signature(p256.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    id_claims = {"iss": "https://accounts.google.com", "sub": "10769150350006150715113082367", "aud": "kindred",
                 "exp": 1800000900, "iat": 1800000000, "nonce": "n-0S6_WzA2Mj", "email": "alice@example.com",
                 "email_verified": True}
    write("FuzzJWT", "id-token-es256", [3] + list(token({"alg": "ES256", "kid": "e1"}, id_claims, es256).encode()))
    numbers = p256.public_key().public_numbers()
    jwks = {"keys": [
        {"kty": "EC", "kid": "e1", "use": "sig", "alg": "ES256", "crv": "P-256",
         "x": b64(numbers.x.to_bytes(32, "big")), "y": b64(numbers.y.to_bytes(32, "big"))},
        {"kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "e": "AQAB",
         "n": b64(hashlib.sha512(b"modulus").digest() * 4)},
        {"kty": "oct", "kid": "h1", "k": "c2VjcmV0"},
    ]}
    write("FuzzJWT", "jwks", [4] + list(json.dumps(jwks).encode()))


def smtp_seeds():
    replies = {
        "greeting": b"220 mx.example.com ESMTP Postfix (Debian/GNU)\r\n",
        "ehlo": b"250-mx.example.com\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-STARTTLS\r\n"
                b"250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n",
        "rcpt-refused": b"550 5.1.1 <bob@example.com>: Recipient address rejected: User unknown\r\n",
        "greylisted": b"451-4.7.1 Greylisting in action,\r\n451 4.7.1 please come back later\r\n",
        "data": b"354 End data with <CR><LF>.<CR><LF>\r\n",
        "bare-lf": b"250 2.0.0 Ok: queued as 4F2A1C0042\n221 2.0.0 Bye\n",
        "bare-code": b"250\r\n",
    }
    for name, data in replies.items():
        write("FuzzSMTPReply", name, [3, 5, 1, 9] + list(data))


def token_and_text_seeds():
    write("FuzzPageTokenMediaURL", "made-up-token", [0] + list(b"MTIuMTgwMDAwMzYwMAB4eHh4"))
    write("FuzzPageTokenMediaURL", "edit-token", [1, 20, 0, 3, 1, 5, 0x41, 0])
    write("FuzzPageTokenMediaURL", "made-up-url",
          [2] + list(b"/media/v1/0190f1de-5c6e-7a1b-9c2d-3e4f5a6b7c8d/3/2.webp?exp=1800001200&sig=AAAA"))
    write("FuzzPageTokenMediaURL", "edit-url", [3, 5, 3, 2, 0, 1, 0, 1, 60, 0x30, 0])
    write("FuzzPageTokenMediaURL", "path", [5] + list(b"/media/v1/0190f1de-5c6e-7a1b-9c2d-3e4f5a6b7c8d/12/1.jpeg"))
    texts = {
        "name": (0, "Alice"), "bio": (3, "Climber, jazz on Sundays\r\nParis 🧗‍♀️"), "city": (6, "  Paris  "),
        "interest-emoji": (9, "👩‍💻"), "username": (18, "alice_94"), "bidi": (0, "Ali\u202ece"),
        "zalgo": (0, "A" + "\u0301" * 20), "flag": (9, "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"),
    }
    for name, (choice, text) in texts.items():
        write("FuzzTextGeohash", f"text-{name}", [choice] + list(text.encode()))
    for cell in ("u09tvw0", "u", "zzzzzzzzzzzz", "s00000000000"):
        write("FuzzTextGeohash", f"cell-{cell}", [1] + list(cell.encode()))
    write("FuzzTextGeohash", "point-paris", [2 + 3 * 6] + list(struct.pack("<dd", 48.8566, 2.3522)))
    write("FuzzTextGeohash", "point-nan", [0x80 + 2 + 3 * 4] + list(struct.pack("<dd", float("nan"), 180.0)))


def http2_seeds():
    """Client frames from python-h2 (the preface itself is the target's: it is cut off here)."""
    import h2.config
    import h2.connection
    import h2.events  # noqa: F401

    def client():
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        connection.initiate_connection()
        return connection

    request = [(":method", "POST"), (":scheme", "http"), (":path", "/kindred.api.v1.DeckService/GetDeck"),
               (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
               ("grpc-timeout", "5S"), ("authorization", "Bearer eyJhbGciOiJFZERTQSJ9.e30.c2ln")]
    message = b"\x00\x00\x00\x00\x04\x08\x14\x10\x01"

    def seed(name, build, plan=(0, 0, 0, 0)):
        connection = client()
        build(connection)
        data = connection.data_to_send()
        write("FuzzHTTP2Server", name, list(plan) + list(data[24:]))

    def unary(c):
        c.send_headers(1, request)
        c.send_data(1, message, end_stream=True)
    seed("unary-call", unary)
    seed("unary-call-split-reads", unary, plan=(0, 1, 2, 3))

    def streams(c):
        for stream in (1, 3, 5):
            c.send_headers(stream, request)
            c.send_data(stream, message)
        c.reset_stream(3)
        c.increment_flow_control_window(1 << 20)
        c.increment_flow_control_window(1, stream_id=1)
        c.end_stream(1)
        c.ping(b"12345678")
        c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 16})
    seed("three-streams-reset-ping-settings", streams)

    def empty_data(c):
        c.send_headers(1, request)
        for _ in range(20):
            c.send_data(1, b"")
    seed("empty-data-flood", empty_data)

    def big_headers(c):
        c.send_headers(1, request + [("x-padding", "a" * 8000), ("x-more", "b" * 9000)], end_stream=True)
    seed("header-list-too-large", big_headers)

    def goaway(c):
        c.send_headers(1, request, end_stream=True)
        c.close_connection()
    seed("goaway", goaway)


def http1_seeds():
    """Requests written by Python's http.client and by h11 (httpx's HTTP/1.1 implementation): keep-alive, bodies
    by length and chunked, pipelined, Connect JSON and gRPC-Web calls, a CORS preflight; and hand-written
    smuggling shapes the port must refuse. The first byte chooses how the bytes are split into reads."""
    import http.client

    import h11

    class Capture:
        def __init__(self):
            self.data = b""

        def sendall(self, data):
            self.data += data

    def by_http_client(method, path, body=None, headers=None, chunked=False):
        connection = http.client.HTTPConnection("localhost", 8080)
        connection.sock = Capture()
        connection.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        return connection.sock.data

    def by_h11(method, target, headers, body_chunks=()):
        client = h11.Connection(h11.CLIENT)
        data = client.send(h11.Request(method=method, target=target, headers=[("Host", "localhost"), *headers]))
        for chunk in body_chunks:
            data += client.send(h11.Data(data=chunk))
        data += client.send(h11.EndOfMessage())
        return data

    connect_json = b'{"username":"ada"}'
    grpc_web = b"\x00\x00\x00\x00\x05\x0a\x03ada"
    seeds = {
        "get-keep-alive": by_http_client("GET", "/media/v1/0190f1de/1.jpeg?e=1700000000&s=abc",
                                         headers={"If-None-Match": '"v1"'}),
        "get-metrics": by_http_client("GET", "/metrics"),
        "post-length": by_http_client("POST", "/kindred.api.v1.AccountService/CheckUsername", body=connect_json,
                                      headers={"Content-Type": "application/json",
                                               "Connect-Protocol-Version": "1", "Connect-Timeout-Ms": "5000"}),
        "post-chunked": by_http_client("POST", "/kindred.api.v1.AccountService/CheckUsername",
                                       body=iter([connect_json[:5], connect_json[5:]]), chunked=True,
                                       headers={"Content-Type": "application/json"}),
        "grpc-web": by_h11(b"POST", b"/kindred.api.v1.AccountService/GetAccount",
                           [("Content-Type", "application/grpc-web+proto"), ("X-Grpc-Web", "1"),
                            ("Grpc-Timeout", "10S"), ("Authorization", "Bearer eyJhbGciOiJFZERTQSJ9.e30.c2ln"),
                            ("Content-Length", str(len(grpc_web)))], [grpc_web]),
        "connect-stream-chunked": by_h11(b"POST", b"/kindred.api.v1.ChatService/Subscribe",
                                         [("Content-Type", "application/connect+json"),
                                          ("Transfer-Encoding", "chunked")], [b"\x00\x00\x00\x00\x02{}"]),
        "cors-preflight": by_h11(b"OPTIONS", b"/kindred.api.v1.AccountService/CheckUsername",
                                 [("Origin", "https://app.example.com"), ("Access-Control-Request-Method", "POST"),
                                  ("Access-Control-Request-Headers", "content-type,connect-protocol-version")]),
        "cors-preflight-other-origin": by_h11(b"OPTIONS", b"/kindred.api.v1.AccountService/CheckUsername",
                                              [("Origin", "https://evil.example"),
                                               ("Access-Control-Request-Method", "POST")]),
        "http10-close": b"GET /app/ HTTP/1.0\r\nUser-Agent: Wget/1.21\r\n\r\n",  # as wget 1.21 writes it
        "connection-close": by_h11(b"GET", b"/app/index.html", [("Connection", "close")]),
    }
    seeds["pipelined"] = seeds["get-keep-alive"] + seeds["post-length"] + seeds["cors-preflight"]
    smuggling = {
        "smuggle-cl-te": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"0\r\n\r\nG",
        "smuggle-te-cl": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
                         b"5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n",
        "smuggle-two-lengths": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabc",
        "smuggle-te-identity": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
                               b"3\r\nabc\r\n0\r\n\r\n",
        "smuggle-te-space": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        "smuggle-obs-fold": b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
        "smuggle-lf-only": b"GET / HTTP/1.1\nHost: a\n\nGET /b HTTP/1.1\r\n\r\n",
        "smuggle-bad-chunk": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n0\r\n\r\n",
        "smuggle-chunk-extension": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   b"3;name=value\r\nabc\r\n0\r\n\r\n",
        "smuggle-nul": b"GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n",
        "header-too-large": b"GET / HTTP/1.1\r\nHost: a\r\nX-Padding: " + b"a" * 17000 + b"\r\n\r\n",
        "slow-header": b"GET / HTTP/1.1\r\nHost: a\r\n",
        "body-short": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc",
    }
    for name, data in {**seeds, **smuggling}.items():
        write("FuzzHTTP1", name, [0] + list(data))
    write("FuzzHTTP1", "pipelined-byte-by-byte", [1] + list(seeds["pipelined"]))
    write("FuzzHTTP1", "post-chunked-split", [5] + list(seeds["post-chunked"]))


def nats_seeds():
    """What a real nats-server (JetStream on) sends a client: INFO, +OK in verbose mode, PING/PONG, MSG and HMSG
    with headers, JetStream API answers, a 503 no-responders status, -ERR."""
    with tempfile.TemporaryDirectory() as folder:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        server = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", folder],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    client = socket.create_connection(("127.0.0.1", port), timeout=5)
                    break
                except OSError:
                    time.sleep(0.05)

            def exchange(send, until):
                client.sendall(send)
                received = b""
                while until not in received:
                    more = client.recv(65536)
                    if not more:
                        raise RuntimeError(f"nats-server closed the connection after {received!r}")
                    received += more
                return received

            greeting = exchange(b"", b"\r\n")
            connect = b'CONNECT {"verbose":true,"pedantic":false,"headers":true,"no_responders":true}\r\nPING\r\n'
            opened = exchange(connect, b"PONG\r\n")
            stream = json.dumps({"name": "SEEDS", "subjects": ["seeds.>"]}).encode()
            api = exchange(b"SUB _INBOX.seeds 1\r\nPUB $JS.API.STREAM.CREATE.SEEDS _INBOX.seeds %d\r\n%s\r\n"
                           % (len(stream), stream), b"}\r\n")
            headers = b"NATS/1.0\r\nNats-Msg-Id: 0b1e2f\r\nKindred-Event: MatchCreated\r\n\r\n"
            payload = b"\x0a\x10match-created-01"
            messages = exchange(b"SUB seeds.match.7.MatchCreated 2\r\nHPUB seeds.match.7.MatchCreated %d %d\r\n"
                                b"%s%s\r\nPUB seeds.match.7.MatchCreated 5\r\nhello\r\nPING\r\n"
                                % (len(headers), len(headers) + len(payload), headers, payload), b"PONG\r\n")
            no_responders = exchange(b"PUB nobody.listens _INBOX.seeds 0\r\n\r\nPING\r\n", b"PONG\r\n")
            get = b'{"seq":99}'
            missing = exchange(b"PUB $JS.API.STREAM.MSG.GET.SEEDS _INBOX.seeds %d\r\n%s\r\nPING\r\n"
                               % (len(get), get), b"PONG\r\n")
            error = exchange(b"NOT A VERB\r\n", b"'\r\n")
        finally:
            server.kill()
            server.wait()
    choices = [0, 0]
    for name, data in {"greeting": greeting, "connect-verbose": opened, "jetstream-api": api, "messages": messages,
                       "no-responders": no_responders, "jetstream-not-found": missing, "error": error}.items():
        write("FuzzNATS", name, choices + list(data))
    write("FuzzNATS", "all-in-three-byte-chunks", [0, 3, 2, 2, 2] + list(greeting + opened + messages))
    write("FuzzNATS", "small-limits", [200, 40, 0x00, 0x01, 0] + list(messages + error))
    write("FuzzNATS", "message-over-small-limit", [200, 40, 5, 0, 0] + list(b"MSG a 1 6\r\nhello!\r\n"))


if __name__ == "__main__":
    # Every generator, or those named (`make-seeds.py nats`).
    generators = {"protobuf": protobuf_seeds, "framing": framing_seeds, "photo": photo_seeds, "jwt": jwt_seeds,
                  "smtp": smtp_seeds, "token_and_text": token_and_text_seeds, "http2": http2_seeds,
                  "http1": http1_seeds, "nats": nats_seeds}
    for name in sys.argv[1:] or generators:
        generators[name]()
    for folder in sorted(CORPUS.iterdir()):
        print(f"{folder.name}: {len(list(folder.iterdir()))} seeds, {sum(f.stat().st_size for f in folder.iterdir())} bytes")
