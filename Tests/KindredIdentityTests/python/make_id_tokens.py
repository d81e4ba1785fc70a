"""Makes a JWKS and OIDC ID tokens signed with freshly generated RS256 and ES256 keys, for the Swift tests.

Prints one JSON object: {"jwks": {...}, "now": <unix seconds>, "tokens": {name: token}}.
"""

import base64
import json
import sys
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def integer(value: int) -> str:
    return b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ec_key = ec.generate_private_key(ec.SECP256R1())
rsa_public = rsa_key.public_key().public_numbers()
ec_public = ec_key.public_key().public_numbers()
other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)

jwks = {"keys": [
    {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": integer(rsa_public.n), "e": integer(rsa_public.e)},
    {"kty": "EC", "kid": "ec-1", "use": "sig", "alg": "ES256", "crv": "P-256",
     "x": b64(ec_public.x.to_bytes(32, "big")), "y": b64(ec_public.y.to_bytes(32, "big"))},
    {"kty": "oct", "kid": "hmac-1", "k": b64(b"secret")},
]}


def sign(header: dict, claims: dict, key, alg: str) -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    if alg == "RS256":
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    elif alg == "ES256":
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        signature = b""
    return f"{signing_input.decode()}.{b64(signature)}"


now = int(time.time())
base = {"iss": "https://accounts.google.com", "sub": "google-user-1", "aud": "kindred-ios", "iat": now,
        "exp": now + 600, "nonce": "n-0S6_WzA2Mj", "email": "Anna@Example.com", "email_verified": True}
tokens = {
    "rs256": sign({"alg": "RS256", "kid": "rsa-1"}, base, rsa_key, "RS256"),
    "es256": sign({"alg": "ES256", "kid": "ec-1"}, dict(base, iss="https://appleid.apple.com", aud=["kindred-web", "kindred-ios"], email_verified="true"), ec_key, "ES256"),
    "expired": sign({"alg": "RS256", "kid": "rsa-1"}, dict(base, exp=now - 3600), rsa_key, "RS256"),
    "wrong_audience": sign({"alg": "RS256", "kid": "rsa-1"}, dict(base, aud="someone-else"), rsa_key, "RS256"),
    "wrong_issuer": sign({"alg": "RS256", "kid": "rsa-1"}, dict(base, iss="https://evil.example"), rsa_key, "RS256"),
    "wrong_key": sign({"alg": "RS256", "kid": "rsa-1"}, base, other_rsa, "RS256"),
    "unknown_kid": sign({"alg": "RS256", "kid": "rsa-9"}, base, rsa_key, "RS256"),
    "alg_none": sign({"alg": "none", "kid": "rsa-1"}, base, None, "none"),
    "alg_mismatch": sign({"alg": "ES256", "kid": "rsa-1"}, base, ec_key, "ES256"),
    "no_nonce": sign({"alg": "RS256", "kid": "rsa-1"}, {k: v for k, v in base.items() if k != "nonce"}, rsa_key, "RS256"),
}
json.dump({"jwks": jwks, "now": now, "tokens": tokens}, sys.stdout)
