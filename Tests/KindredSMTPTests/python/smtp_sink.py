#!/usr/bin/env python3
"""A real SMTP server (aiosmtpd) for the KindredSMTP tests.

Listens on 127.0.0.1 (a free port), optionally with STARTTLS, implicit TLS and AUTH, and writes
every accepted message as JSON into a directory: the envelope, the raw content, and the fields
Python's email package decodes from it (email.header for encoded-words, policy.default for the
MIME structure and defects). Prints "LISTENING <port>" when ready; exits when stdin closes.
"""

import argparse
import base64
import json
import os
import socket
import ssl
import sys
import threading
from email import message_from_bytes, policy
from email.header import decode_header, make_header

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def decoded_header(value):
    """Decodes RFC 2047 encoded-words with email.header (the raw value may be folded)."""
    if value is None:
        return None
    return str(make_header(decode_header(value)))


def describe(content):
    """What the tests assert on, decoded by Python's email package."""
    raw = message_from_bytes(content)  # compat32: header values as sent (folded, encoded)
    modern = message_from_bytes(content, policy=policy.default)
    defects = [type(d).__name__ for d in modern.defects]
    for part in modern.walk():
        defects += [type(d).__name__ for d in part.defects]
    for name in ("Subject", "From", "To", "Reply-To", "Date", "Message-ID"):
        if modern[name] is not None:
            defects += [f"{name}:{type(d).__name__}" for d in modern[name].defects]

    def addresses(name):
        header = modern[name]
        if header is None:
            return []
        return [{"name": a.display_name, "address": a.addr_spec} for a in header.addresses]

    def body(subtype):
        part = modern.get_body(preferencelist=(subtype,))
        if part is None or part.get_content_type() != f"text/{subtype}":
            return None
        return part.get_content().replace("\r\n", "\n")

    lines = content.split(b"\r\n")
    return {
        "subject_email_header": decoded_header(raw["Subject"]),
        "subject": str(modern["Subject"]) if modern["Subject"] is not None else None,
        "from_email_header": decoded_header(raw["From"]),
        "from": addresses("From"),
        "to": addresses("To"),
        "reply_to": addresses("Reply-To"),
        "message_id": modern["Message-ID"],
        "date": modern["Date"],
        "date_utc": modern["Date"].datetime.isoformat() if modern["Date"] is not None else None,
        "content_type": modern.get_content_type(),
        "parts": [
            {"type": p.get_content_type(), "encoding": p.get("Content-Transfer-Encoding")}
            for p in modern.walk()
            if not p.is_multipart()
        ],
        "headers": {k: v for k, v in raw.items()},
        "text": body("plain"),
        "html": body("html"),
        "defects": defects,
        "max_line_length": max(len(line) for line in lines),
        "bare_lf": b"\n" in content.replace(b"\r\n", b""),
        "eight_bit": any(b >= 0x80 for b in content),
    }


class Handler:
    def __init__(self, directory, reject_recipients, tempfail_recipients, reject_senders):
        self.directory = directory
        self.reject_recipients = set(reject_recipients)
        self.tempfail_recipients = set(tempfail_recipients)
        self.reject_senders = set(reject_senders)
        self.count = 0
        self.lock = threading.Lock()

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if address in self.reject_senders:
            return "553 5.7.1 Sender address rejected"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.reject_recipients:
            return "550 5.1.1 Recipient address rejected: user unknown"
        if address in self.tempfail_recipients:
            return "450 4.2.0 Recipient address rejected: greylisted"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        content = envelope.original_content
        record = {
            "mail_from": envelope.mail_from,
            "mail_options": envelope.mail_options,
            "rcpt_tos": envelope.rcpt_tos,
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "auth_user": session.auth_data.decode() if isinstance(session.auth_data, bytes) else None,
            "raw_base64": base64.b64encode(content).decode(),
        }
        try:
            record["parsed"] = describe(content)
        except Exception as error:  # report, do not hide the message
            record["parse_error"] = repr(error)
        with self.lock:
            self.count += 1
            name = f"message-{self.count:04d}.json"
        temporary = os.path.join(self.directory, "." + name)
        with open(temporary, "w") as file:
            json.dump(record, file)
        os.rename(temporary, os.path.join(self.directory, name))
        return "250 2.0.0 Message accepted"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--require-starttls", action="store_true")
    parser.add_argument("--implicit-tls", action="store_true")
    parser.add_argument("--auth", help="USER:PASSWORD accepted by AUTH")
    parser.add_argument("--exclude-auth", action="append", default=[], help="mechanism not offered")
    parser.add_argument("--reject-rcpt", action="append", default=[])
    parser.add_argument("--tempfail-rcpt", action="append", default=[])
    parser.add_argument("--reject-sender", action="append", default=[])
    parser.add_argument("--size-limit", type=int, default=33554432)
    args = parser.parse_args()

    tls_context = None
    if args.tls_cert:
        tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls_context.load_cert_chain(args.tls_cert, args.tls_key)

    kwargs = {"data_size_limit": args.size_limit}
    if args.auth:
        user, password = args.auth.split(":", 1)

        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = auth_data.login == user.encode() and auth_data.password == password.encode()
            if not ok:
                # handled=False: aiosmtpd sends "535 5.7.8" itself.
                return AuthResult(success=False, handled=False)
            return AuthResult(success=True, auth_data=auth_data.login)

        kwargs.update(authenticator=authenticator, auth_require_tls=True)
        if args.exclude_auth:
            kwargs["auth_exclude_mechanism"] = args.exclude_auth
    if tls_context is not None and not args.implicit_tls:
        kwargs.update(tls_context=tls_context, require_starttls=args.require_starttls)

    handler = Handler(args.directory, args.reject_rcpt, args.tempfail_rcpt, args.reject_sender)
    last_error = None
    for _ in range(10):
        port = free_port()
        controller = Controller(
            handler,
            hostname="127.0.0.1",
            port=port,
            server_hostname="sink.kindred.test",
            ssl_context=tls_context if args.implicit_tls else None,
            **kwargs,
        )
        try:
            controller.start()
            break
        except Exception as error:  # the port was taken meanwhile: try another
            last_error = error
    else:
        raise SystemExit(f"cannot start the SMTP sink: {last_error!r}")

    print(f"LISTENING {port}", flush=True)
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main()
