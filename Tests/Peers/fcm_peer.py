#!/usr/bin/env python3
"""An FCM-compatible peer: Google's OAuth 2.0 token endpoint for service accounts (the JWT bearer grant, RFC 7523)
and Firebase Cloud Messaging's HTTP v1 `messages:send`, on one HTTP/2 TLS server. Written with `h2` and
`cryptography`, independent of Kindred's code.

POST /token: grant_type urn:ietf:params:oauth:grant-type:jwt-bearer and an RS256 assertion whose signature verifies
under the service account's public key (--public-key), iss = --client-email, aud = --token-uri, scope includes
https://www.googleapis.com/auth/firebase.messaging, exp after now and at most an hour after iat; answers an access
token valid --token-lifetime seconds, or 400 {"error": "invalid_grant"}.

POST /v1/projects/<--project>/messages:send: `authorization: Bearer <access token>` issued here and unexpired (else
401 UNAUTHENTICATED); a JSON {"message": {...}} with a token, string data values, notification title/body strings,
android priority HIGH|NORMAL, ttl like "3600s" and collapse_key (else 400 INVALID_ARGUMENT); the time FCM may keep
the message (arrival + android.ttl, else four weeks) is recorded as `expires_unix_ms`. Answers
{"name": "projects/<p>/messages/<id>"}, or what --rules says for the registration token, with Google's error body
(status, message, details with the FcmError errorCode)."""
import json
import re
import secrets
import time
import urllib.parse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from h2_peer import Recorder, Response, Rules, common_arguments, serve, split_jwt

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def google_error(status, message, error_code=None):
    error = {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}
    if error_code:
        error["details"] = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}]
    return {"error": error}


class Invalid(Exception):
    pass


class FCMPeer:
    def __init__(self, args):
        with open(args.public_key, "rb") as handle:
            self.public_key = serialization.load_pem_public_key(handle.read())
        self.client_email = args.client_email
        self.token_uri = args.token_uri
        self.project = args.project
        self.lifetime = args.token_lifetime
        self.tokens = {}
        self.recorder = Recorder(args.record)
        self.rules = Rules(args.rules)

    def handle(self, request):
        if request.method == "POST" and request.path == "/token":
            return self.token(request)
        if request.method == "POST" and request.path == f"/v1/projects/{self.project}/messages:send":
            return self.send(request)
        self.recorder.record({"kind": "other", "path": request.path, "status": 404})
        return Response(404, google_error(404, "Not found"))

    def token(self, request):
        entry = {"kind": "token", "connection": request.connection_id}
        try:
            if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
                raise Invalid("content-type is not a form")
            form = urllib.parse.parse_qs(request.body.decode(), strict_parsing=True)
            if form.get("grant_type") != [GRANT]:
                raise Invalid("unsupported grant_type")
            assertion = form.get("assertion", [""])[0]
            try:
                header, claims, signing_input, signature = split_jwt(assertion)
            except ValueError:
                raise Invalid("malformed assertion")
            if header.get("alg") != "RS256":
                raise Invalid("alg is not RS256")
            try:
                self.public_key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
            except InvalidSignature:
                raise Invalid("Invalid JWT Signature.")
            now = time.time()
            if claims.get("iss") != self.client_email:
                raise Invalid("iss is not the service account")
            if claims.get("aud") != self.token_uri:
                raise Invalid("aud is not the token URI")
            if SCOPE not in str(claims.get("scope", "")).split(" "):
                raise Invalid("scope lacks firebase.messaging")
            issued, expires = claims.get("iat"), claims.get("exp")
            if not isinstance(issued, int) or not isinstance(expires, int):
                raise Invalid("iat and exp must be integers")
            if expires <= now or expires - issued > 3600 or issued > now + 60:
                raise Invalid("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        except Invalid as invalid:
            entry.update(status=400, reason=str(invalid), accepted=False)
            self.recorder.record(entry)
            return Response(400, {"error": "invalid_grant", "error_description": str(invalid)},
                            [("content-type", "application/json")])
        access = "ya29.kindred-" + secrets.token_urlsafe(24)
        self.tokens[access] = time.time() + self.lifetime
        entry.update(status=200, accepted=True, access_token=access, claims=claims, header=header)
        self.recorder.record(entry)
        return Response(200, {"access_token": access, "expires_in": self.lifetime, "token_type": "Bearer"},
                        [("content-type", "application/json")])

    def check_message(self, request):
        try:
            document = json.loads(request.body)
        except ValueError:
            raise Invalid("Invalid JSON payload received.")
        message = document.get("message") if isinstance(document, dict) else None
        if not isinstance(message, dict):
            raise Invalid("message is required")
        token = message.get("token")
        if not isinstance(token, str) or not token:
            raise Invalid("message.token is required")
        data = message.get("data", {})
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise Invalid("data values must be strings")
        notification = message.get("notification", {})
        if not isinstance(notification, dict) or not all(isinstance(notification.get(k, ""), str) for k in ("title", "body")):
            raise Invalid("notification title and body must be strings")
        android = message.get("android", {})
        if not isinstance(android, dict):
            raise Invalid("android must be an object")
        if android.get("priority", "NORMAL") not in ("NORMAL", "HIGH"):
            raise Invalid("android.priority must be NORMAL or HIGH")
        ttl = android.get("ttl")
        if ttl is not None and not re.fullmatch(r"\d+(\.\d{1,9})?s", str(ttl)):
            raise Invalid("android.ttl must be a duration like 3600s")
        collapse = android.get("collapse_key")
        if collapse is not None and not isinstance(collapse, str):
            raise Invalid("android.collapse_key must be a string")
        return token, message

    def send(self, request):
        received = time.time()
        entry = {"kind": "send", "connection": request.connection_id, "open_streams": request.open_streams}
        authorization = request.headers.get("authorization", "")
        scheme, _, access = authorization.partition(" ")
        expiry = self.tokens.get(access)
        if scheme != "Bearer" or expiry is None or expiry <= time.time():
            entry.update(status=401, reason="UNAUTHENTICATED", accepted=False)
            self.recorder.record(entry)
            return Response(401, google_error(401, "Request had invalid authentication credentials."))
        entry["access_token"] = access
        try:
            token, message = self.check_message(request)
        except Invalid as invalid:
            entry.update(status=400, reason="INVALID_ARGUMENT", accepted=False)
            self.recorder.record(entry)
            return Response(400, google_error(400, str(invalid), "INVALID_ARGUMENT"))
        ttl = message.get("android", {}).get("ttl")
        # When FCM may drop the message undelivered (ms since the epoch); no ttl: FCM's default of four weeks.
        expires = received + float(str(ttl)[:-1]) if ttl is not None else received + 28 * 86400
        entry.update(registration_token=token, message=message, expires_unix_ms=int(expires * 1000))
        rule = self.rules.for_target(token)
        if rule and rule.get("status", 200) != 200:
            status = rule["status"]
            headers = [("content-type", "application/json")]
            if "retry_after" in rule:
                headers.append(("retry-after", str(rule["retry_after"])))
            error_code = rule.get("error_code")
            entry.update(status=status, reason=error_code or STATUS_NAMES.get(status), accepted=False)
            self.recorder.record(entry)
            return Response(status, google_error(status, rule.get("message", "refused by rule"), error_code), headers)
        name = f"projects/{self.project}/messages/0:{secrets.token_hex(8)}"
        entry.update(status=200, accepted=True, name=name)
        self.recorder.record(entry)
        return Response(200, {"name": name}, [("content-type", "application/json")])


def main():
    parser = common_arguments(__doc__.splitlines()[0])
    parser.add_argument("--public-key", required=True, help="PEM public key of the service account")
    parser.add_argument("--client-email", required=True)
    parser.add_argument("--token-uri", required=True, help="the aud the assertion must carry")
    parser.add_argument("--project", required=True)
    parser.add_argument("--token-lifetime", type=int, default=3600)
    args = parser.parse_args()
    serve(args, FCMPeer(args).handle)


if __name__ == "__main__":
    main()
