#!/usr/bin/env python3
"""Writes throwaway keys and certificates for the push provider peers into a folder (nothing here is committed):

  ca.pem                      a CA certificate; the providers' trust root when they talk to a local peer
  server.pem, server-key.pem  the peers' TLS certificate (localhost, 127.0.0.1, ::1) signed by that CA
  apns-key.p8                 an APNs signing key (PKCS#8 PEM, EC P-256), as Apple's developer account issues
  apns-key.pub.pem            its public key, which the APNs peer verifies provider tokens with
  apns-other-key.p8           another P-256 key: tokens signed with it must be refused
  fcm-service-account.json    a Google service-account key file (RSA 2048) whose token_uri is --token-uri
  fcm-service-account.pub.pem its public key, which the FCM peer verifies the grant's assertion with
  fcm-other-account.json      the same account with another key: its assertions must be refused
  vapid-key.pem               a Web Push VAPID key (PKCS#8 PEM, EC P-256)
  vapid-key.pub.pem           its public key, which the Web Push peer verifies VAPID tokens with
  vapid-other-key.pem         another P-256 key: tokens signed with it must be refused

Usage: push_test_keys.py FOLDER [--token-uri https://127.0.0.1:PORT/token] [--project kindred-test]
"""
import argparse
import datetime
import ipaddress
import json
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def pem_private(key):
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def pem_public(key):
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def write(folder, name, data, private=False):
    path = os.path.join(folder, name)
    with open(path, "wb") as handle:
        handle.write(data)
    if private:
        os.chmod(path, 0o600)
    return path


def certificates(folder):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Kindred push peers test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    write(folder, "ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    write(folder, "server.pem", server.public_bytes(serialization.Encoding.PEM))
    write(folder, "server-key.pem", pem_private(server_key), private=True)


def service_account(folder, name, key, token_uri, project):
    document = {
        "type": "service_account",
        "project_id": project,
        "private_key_id": "kindred-test-key-1",
        "private_key": pem_private(key).decode(),
        "client_email": f"push@{project}.iam.gserviceaccount.com",
        "client_id": "100000000000000000001",
        "token_uri": token_uri,
    }
    write(folder, name, json.dumps(document, indent=2).encode(), private=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--token-uri", default="https://127.0.0.1:8443/token")
    parser.add_argument("--project", default="kindred-test")
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    certificates(args.folder)
    apns = ec.generate_private_key(ec.SECP256R1())
    write(args.folder, "apns-key.p8", pem_private(apns), private=True)
    write(args.folder, "apns-key.pub.pem", pem_public(apns))
    write(args.folder, "apns-other-key.p8", pem_private(ec.generate_private_key(ec.SECP256R1())), private=True)
    vapid = ec.generate_private_key(ec.SECP256R1())
    write(args.folder, "vapid-key.pem", pem_private(vapid), private=True)
    write(args.folder, "vapid-key.pub.pem", pem_public(vapid))
    write(args.folder, "vapid-other-key.pem", pem_private(ec.generate_private_key(ec.SECP256R1())), private=True)
    account = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    service_account(args.folder, "fcm-service-account.json", account, args.token_uri, args.project)
    write(args.folder, "fcm-service-account.pub.pem", pem_public(account))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    service_account(args.folder, "fcm-other-account.json", other, args.token_uri, args.project)


if __name__ == "__main__":
    main()
