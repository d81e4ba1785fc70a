#!/usr/bin/env python3
"""Makes an ES256 key, writes its JWKS to argv[1], reads a JSON list of claim objects from stdin and prints a
JSON list of ID tokens signed with the key (for the SignInWithIdToken tests). Needs `cryptography`."""

import base64
import json
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


key = ec.generate_private_key(ec.SECP256R1())
public = key.public_key().public_numbers()
with open(sys.argv[1], "w") as file:
    json.dump({"keys": [{"kty": "EC", "kid": "test-1", "use": "sig", "alg": "ES256", "crv": "P-256",
                         "x": b64(public.x.to_bytes(32, "big")), "y": b64(public.y.to_bytes(32, "big"))}]}, file)

tokens = []
for claims in json.load(sys.stdin):
    header = {"alg": "ES256", "kid": "test-1", "typ": "JWT"}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    tokens.append(f"{signing_input.decode()}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}")
print(json.dumps(tokens))
