#!/usr/bin/env python3
"""An APNs-compatible provider API peer: HTTP/2 over TLS that checks each push the way Apple documents
("Sending notification requests to APNs", "Establishing a token-based connection to APNs") and answers as APNs
does. Written with `h2` and `cryptography`, independent of Kindred's code.

Checks: POST /3/device/<hex token>; `authorization: bearer <JWT>` with alg ES256, kid = --key-id, iss = --team-id,
iat no older than an hour (403 ExpiredProviderToken) and not in the future, signature valid under the public key of
the .p8 key (--public-key; else 403 InvalidProviderToken); apns-topic among --topic; apns-push-type, apns-priority,
apns-expiration, apns-collapse-id (<= 64 bytes), apns-id (a UUID) well formed; a JSON payload of at most 4 KiB with
aps.alert.title and aps.alert.body. Answers 200 with apns-id, or Apple's status and {"reason": ...}. The expiry
(apns-expiration, in ms) is recorded as `expires_unix_ms`, the same field as the FCM and Web Push peers'.

Every request is recorded (--record) with its verdict; --rules makes chosen device tokens answer 410, 429 with
Retry-After, 500, ... or answer late (delay_ms). --processes N serves with N processes on the one port (each checks
every push it receives; the record is shared), for benchmarks that one Python event loop cannot keep up with."""
import asyncio
import json
import re
import time
import uuid

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from h2_peer import Recorder, Response, Rules, common_arguments, serve, split_jwt

UUID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
PUSH_TYPES = {"alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity"}


def expiry_of(headers):
    """When APNs may drop the push undelivered, in ms since the epoch: `apns-expiration` (seconds; absent or 0: store
    it only if it can be delivered now, recorded as None)."""
    expiration = int(headers.get("apns-expiration") or 0)
    return expiration * 1000 if expiration else None


class Refused(Exception):
    def __init__(self, status, reason):
        self.status = status
        self.reason = reason


class APNsPeer:
    def __init__(self, args):
        with open(args.public_key, "rb") as handle:
            self.public_key = serialization.load_pem_public_key(handle.read())
        self.key_id = args.key_id
        self.team_id = args.team_id
        self.topics = set(args.topic)
        self.recorder = Recorder(args.record)
        self.rules = Rules(args.rules)
        # Provider tokens whose signature verified: a provider sends one token for up to an hour, and the
        # signature of the same bytes needs checking once (the age is still checked on every push).
        self.verified = set()

    def verify_provider_token(self, authorization):
        if not authorization:
            raise Refused(403, "MissingProviderToken")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Refused(403, "InvalidProviderToken")
        try:
            header, claims, signing_input, signature = split_jwt(token)
        except ValueError:
            raise Refused(403, "InvalidProviderToken")
        if header.get("alg") != "ES256" or header.get("kid") != self.key_id or claims.get("iss") != self.team_id:
            raise Refused(403, "InvalidProviderToken")
        if len(signature) != 64:
            raise Refused(403, "InvalidProviderToken")
        if token not in self.verified:
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            try:
                self.public_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                raise Refused(403, "InvalidProviderToken")
            if len(self.verified) > 1000:
                self.verified.clear()
            self.verified.add(token)
        issued = claims.get("iat")
        if not isinstance(issued, int):
            raise Refused(403, "InvalidProviderToken")
        now = time.time()
        if issued > now + 60:
            raise Refused(403, "InvalidProviderToken")
        if now - issued > 3600:
            raise Refused(403, "ExpiredProviderToken")
        return {"header": header, "claims": claims, "token": token}

    def check(self, request):
        """The device token, provider token and payload of a well-formed push; raises Refused otherwise."""
        if request.method != "POST":
            raise Refused(405, "MethodNotAllowed")
        match = re.fullmatch(r"/3/device/([^/]+)", request.path)
        if not match:
            raise Refused(404, "BadPath")
        device = match.group(1)
        if not re.fullmatch(r"[0-9a-fA-F]{8,200}", device):
            raise Refused(400, "BadDeviceToken")
        headers = request.headers
        jwt = self.verify_provider_token(headers.get("authorization"))
        topic = headers.get("apns-topic")
        if not topic:
            raise Refused(400, "MissingTopic")
        if topic not in self.topics:
            raise Refused(400, "TopicDisallowed")
        push_type = headers.get("apns-push-type", "alert")
        if push_type not in PUSH_TYPES:
            raise Refused(400, "InvalidPushType")
        if headers.get("apns-priority", "10") not in {"10", "5", "1"}:
            raise Refused(400, "BadPriority")
        expiration = headers.get("apns-expiration")
        if expiration is not None and not re.fullmatch(r"\d{1,12}", expiration):
            raise Refused(400, "BadExpirationDate")
        collapse = headers.get("apns-collapse-id")
        if collapse is not None and len(collapse.encode()) > 64:
            raise Refused(400, "BadCollapseId")
        apns_id = headers.get("apns-id")
        if apns_id is not None and not UUID_PATTERN.match(apns_id):
            raise Refused(400, "BadMessageId")
        if len(request.body) > 4096:
            raise Refused(413, "PayloadTooLarge")
        if not request.body:
            raise Refused(400, "PayloadEmpty")
        try:
            payload = json.loads(request.body)
        except ValueError:
            raise Refused(400, "BadPayload")
        aps = payload.get("aps") if isinstance(payload, dict) else None
        if not isinstance(aps, dict):
            raise Refused(400, "BadPayload")
        if push_type == "alert":
            alert = aps.get("alert")
            if not isinstance(alert, dict) or not isinstance(alert.get("title"), str) or not isinstance(alert.get("body"), str):
                raise Refused(400, "BadPayload")
        if "badge" in aps and not isinstance(aps["badge"], int):
            raise Refused(400, "BadPayload")
        return device, jwt, payload

    def handle(self, request):
        entry = {
            "connection": request.connection_id,
            "stream": request.stream_id,
            "open_streams": request.open_streams,
            "path": request.path,
            "headers": {k: v for k, v in request.headers.items() if not k.startswith(":") and k != "authorization"},
        }
        apns_id = request.headers.get("apns-id") or str(uuid.uuid4())
        try:
            device, jwt, payload = self.check(request)
        except Refused as refused:
            entry.update(status=refused.status, reason=refused.reason, accepted=False)
            self.recorder.record(entry)
            return Response(refused.status, {"reason": refused.reason}, [("apns-id", apns_id)])
        entry.update(device=device, jwt={"header": jwt["header"], "claims": jwt["claims"], "token": jwt["token"]}, payload=payload,
                     expires_unix_ms=expiry_of(request.headers))
        rule = self.rules.for_target(device)
        if rule and rule.get("status", 200) != 200:
            status = rule["status"]
            body = {"reason": rule.get("reason", "InternalServerError")}
            if status == 410:
                body["timestamp"] = int(time.time() * 1000)
            headers = [("apns-id", apns_id)]
            if "retry_after" in rule:
                headers.append(("retry-after", str(rule["retry_after"])))
            entry.update(status=status, reason=body["reason"], accepted=False)
            response = Response(status, body, headers)
        else:
            entry.update(status=200, accepted=True)
            response = Response(200, b"", [("apns-id", apns_id)])
        self.recorder.record(entry)
        if rule and rule.get("delay_ms"):
            asyncio.get_running_loop().call_later(rule["delay_ms"] / 1000, request.respond, response)
            return None
        return response


def main():
    parser = common_arguments(__doc__.splitlines()[0])
    parser.add_argument("--public-key", required=True, help="PEM public key of the provider's .p8 signing key")
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", action="append", required=True, help="an allowed apns-topic (repeatable)")
    parser.add_argument("--processes", type=int, default=1,
                        help="serve with this many processes, each its own event loop (benchmarks: one tops out first)")
    args = parser.parse_args()
    serve(args, APNsPeer(args).handle, processes=max(1, args.processes))


if __name__ == "__main__":
    main()
