#!/usr/bin/env python3
"""A Web Push service peer (RFC 8030) that stands in for a browser's push service and the browser behind it:
HTTP/2 over TLS, written with `h2`, `http_ece` (the Web Push encryption reference package) and `cryptography`,
independent of Kindred's code.

POST /subscribe makes a subscription as a browser's pushManager.subscribe() would: a fresh P-256 key pair and a
16-byte auth secret, answered as {"id", "endpoint", "p256dh", "auth"} (PushSubscription.toJSON()'s fields); the
private key stays here.

POST /push/<id> checks each push the way a push service does and then decrypts it as the browser would:
- VAPID (RFC 8292): `authorization: vapid t=<JWT>, k=<key>` with k the --vapid-public-key (the
  applicationServerKey the subscription was made for), an ES256 signature valid under it, aud = the origin the
  request was sent to, exp in the future and at most 24 hours ahead, sub a mailto: or https: URL; else 403;
- `ttl` present (a non-negative integer), `urgency` one of very-low/low/normal/high, `topic` at most 32 base64url
  characters, `content-encoding: aes128gcm`; else 400; arrival + `ttl` is recorded as `expires_unix_ms`;
- a body of at most 4096 bytes (else 413) that `http_ece.decrypt` opens with the subscription's private key and
  auth secret (else 400), holding JSON.
Answers 201 with a `location`, 410 for an unknown subscription, or what --rules says per subscription id (410, 429
with retry_after, 500, delay_ms). Every request is recorded (--record) with its verdict and the decrypted payload."""
import base64
import json
import os
import re
import time
import uuid

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from h2_peer import Recorder, Response, Rules, b64url_decode, common_arguments, serve, split_jwt

TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
URGENCIES = {"very-low", "low", "normal", "high"}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def point(public_key):
    return public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


class Refused(Exception):
    def __init__(self, status, reason):
        self.status = status
        self.reason = reason


class WebPushPeer:
    def __init__(self, args):
        with open(args.vapid_public_key, "rb") as handle:
            self.vapid_key = serialization.load_pem_public_key(handle.read())
        self.vapid_k = b64url(point(self.vapid_key))
        self.subscriptions = {}
        self.recorder = Recorder(args.record)
        self.rules = Rules(args.rules)
        self.verified = set()

    def subscribe(self, request):
        key = ec.generate_private_key(ec.SECP256R1())
        auth = os.urandom(16)
        subscription_id = uuid.uuid4().hex
        self.subscriptions[subscription_id] = (key, auth)
        authority = request.headers.get(":authority", "")
        return Response(201, {
            "id": subscription_id,
            "endpoint": f"https://{authority}/push/{subscription_id}",
            "p256dh": b64url(point(key.public_key())),
            "auth": b64url(auth),
        }, [("content-type", "application/json")])

    def verify_vapid(self, request):
        authorization = request.headers.get("authorization", "")
        scheme, _, rest = authorization.partition(" ")
        if scheme.lower() != "vapid":
            raise Refused(401, "missing vapid authorization")
        parameters = {}
        for part in rest.split(","):
            name, _, value = part.strip().partition("=")
            parameters[name.strip()] = value.strip()
        token, k = parameters.get("t"), parameters.get("k")
        if not token or not k:
            raise Refused(401, "vapid t= and k= required")
        if k != self.vapid_k:
            raise Refused(403, "k is not the subscription's application server key")
        try:
            header, claims, signing_input, signature = split_jwt(token)
        except ValueError:
            raise Refused(403, "malformed JWT")
        if header.get("alg") != "ES256" or len(signature) != 64:
            raise Refused(403, "not an ES256 JWT")
        if token not in self.verified:
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            try:
                self.vapid_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                raise Refused(403, "bad signature")
            if len(self.verified) > 1000:
                self.verified.clear()
            self.verified.add(token)
        authority = request.headers.get(":authority", "")
        host, _, port = authority.rpartition(":")
        origin = f"https://{host}" if port == "443" else f"https://{authority}"
        if claims.get("aud") != origin:
            raise Refused(403, "aud is not this push service's origin")
        expires = claims.get("exp")
        now = time.time()
        if not isinstance(expires, int) or expires <= now:
            raise Refused(403, "expired")
        if expires > now + 86400 + 60:
            raise Refused(403, "exp more than 24 hours ahead")
        subject = claims.get("sub", "")
        if not isinstance(subject, str) or not (subject.startswith("mailto:") or subject.startswith("https:")):
            raise Refused(403, "sub is not a mailto: or https: contact")
        return claims

    def check(self, request, subscription_id):
        if subscription_id not in self.subscriptions:
            raise Refused(410, "no such subscription")
        claims = self.verify_vapid(request)
        headers = request.headers
        if not re.fullmatch(r"\d{1,10}", headers.get("ttl", "")):
            raise Refused(400, "TTL header required")
        if headers.get("urgency", "normal") not in URGENCIES:
            raise Refused(400, "bad urgency")
        topic = headers.get("topic")
        if topic is not None and not TOPIC.match(topic):
            raise Refused(400, "bad topic")
        if headers.get("content-encoding") != "aes128gcm":
            raise Refused(400, "content-encoding must be aes128gcm")
        if len(request.body) > 4096:
            raise Refused(413, "payload too large")
        key, auth = self.subscriptions[subscription_id]
        try:
            plaintext = http_ece.decrypt(bytes(request.body), private_key=key, auth_secret=auth, version="aes128gcm")
            payload = json.loads(plaintext)
        except Exception as error:
            raise Refused(400, f"cannot decrypt: {type(error).__name__}")
        return claims, payload

    def handle(self, request):
        if request.method == "POST" and request.path == "/subscribe":
            return self.subscribe(request)
        match = re.fullmatch(r"/push/([0-9a-f]+)", request.path)
        if request.method != "POST" or not match:
            return Response(404, {"reason": "not found"})
        subscription_id = match.group(1)
        received = time.time()
        entry = {
            "connection": request.connection_id,
            "stream": request.stream_id,
            "open_streams": request.open_streams,
            "subscription": subscription_id,
            "body_length": len(request.body),
            "headers": {k: v for k, v in request.headers.items() if not k.startswith(":") and k != "authorization"},
        }
        try:
            claims, payload = self.check(request, subscription_id)
        except Refused as refused:
            entry.update(status=refused.status, reason=refused.reason, accepted=False)
            self.recorder.record(entry)
            return Response(refused.status, {"reason": refused.reason})
        # RFC 8030 §5.2: the push service keeps the message at most TTL seconds after it arrived.
        entry.update(vapid=claims, payload=payload, expires_unix_ms=int((received + int(request.headers["ttl"])) * 1000))
        rule = self.rules.for_target(subscription_id)
        if rule and rule.get("status", 201) not in (200, 201):
            status = rule["status"]
            headers = [("retry-after", str(rule["retry_after"]))] if "retry_after" in rule else []
            entry.update(status=status, reason=rule.get("reason", f"HTTP {status}"), accepted=False)
            response = Response(status, {"reason": entry["reason"]}, headers)
        else:
            entry.update(status=201, accepted=True)
            response = Response(201, b"", [("location", f"/message/{uuid.uuid4().hex}")])
        self.recorder.record(entry)
        if rule and rule.get("delay_ms"):
            import asyncio
            asyncio.get_running_loop().call_later(rule["delay_ms"] / 1000, request.respond, response)
            return None
        return response


def main():
    parser = common_arguments(__doc__.splitlines()[0])
    parser.add_argument("--vapid-public-key", required=True, help="PEM public key of the application server's VAPID key")
    args = parser.parse_args()
    serve(args, WebPushPeer(args).handle)


if __name__ == "__main__":
    main()
