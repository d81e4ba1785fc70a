#!/usr/bin/env python3
"""The development mail sink of the local cluster: an SMTP server (aiosmtpd) that delivers nothing.

Every accepted mail is written as one RFC 5322 file, mail-NNNNNN.eml, into the mail folder (envelope
sender and recipients prepended as X-MailFrom / X-RcptTo headers, as aiosmtpd's own Message handler does),
and logged as one line on stdout:

    mail mail-000001.eml to=ann@example.com subject="Confirm your email address" code=123456

so a developer reads sign-up codes from the log (or the file) instead of a real inbox. Prints
"LISTENING <host>:<port>" once it accepts connections; SIGTERM or SIGINT stops it (exit 0).

Usage: smtp_sink.py MAIL_DIR [--host 127.0.0.1] [--port 2525]
"""

import argparse
import asyncio
import json
import os
import re
import signal
import sys
from email import message_from_bytes, policy

from aiosmtpd.smtp import SMTP

# A 6-digit code named as such ("... code in the app: 123456"), else a lone 6-digit number. Link tokens are
# base64url, so a number that is part of a longer token (letters, digits, '-' or '_' around it) never counts.
NAMED_CODE = re.compile(r"\bcode\b[^0-9\n]{0,40}(?<![\w-])(\d{6})(?![\w-])", re.IGNORECASE)
LONE_CODE = re.compile(r"(?<![\w-])(\d{6})(?![\w-])")


def summary(content: bytes):
    """(subject, code or None) of a mail, decoded with Python's email package."""
    message = message_from_bytes(content, policy=policy.default)
    subject = str(message["Subject"] or "")
    body = message.get_body(preferencelist=("plain", "html"))
    text = body.get_content() if body is not None else ""
    match = NAMED_CODE.search(text) or LONE_CODE.search(text)
    return subject, match.group(1) if match else None


class Sink:
    def __init__(self, directory: str):
        self.directory = directory
        numbers = [int(m.group(1)) for name in os.listdir(directory) if (m := re.fullmatch(r"mail-(\d+)\.eml", name))]
        self.count = max(numbers, default=0)

    async def handle_DATA(self, server, session, envelope):
        content = envelope.original_content
        prefix = f"X-MailFrom: {envelope.mail_from}\r\nX-RcptTo: {', '.join(envelope.rcpt_tos)}\r\n".encode()
        self.count += 1  # handlers run on the one event loop: no lock needed
        name = f"mail-{self.count:06d}.eml"
        temporary = os.path.join(self.directory, f".{name}.tmp")
        with open(temporary, "wb") as file:
            file.write(prefix + content)
        os.rename(temporary, os.path.join(self.directory, name))  # readers never see half a mail
        try:
            subject, code = summary(content)
        except Exception as error:  # a mail the parser rejects is still stored and logged
            subject, code = f"<unparsed: {error!r}>", None
        line = f"mail {name} to={','.join(envelope.rcpt_tos)} subject={json.dumps(subject, ensure_ascii=False)}"
        print(line + (f" code={code}" if code else ""), flush=True)
        return "250 2.0.0 Message accepted (development sink: not delivered)"


async def serve(directory: str, host: str, port: int):
    loop = asyncio.get_running_loop()
    sink = Sink(directory)
    server = await loop.create_server(
        lambda: SMTP(sink, hostname="smtp-sink.kindred.invalid", enable_SMTPUTF8=True), host, port
    )
    stop = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    print(f"LISTENING {host}:{port} mail in {os.path.abspath(directory)}", flush=True)
    await stop.wait()
    server.close()
    await server.wait_closed()


def main():
    parser = argparse.ArgumentParser(description="Development SMTP sink: stores mails as files, logs codes.")
    parser.add_argument("directory", help="mail folder (created if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=2525)
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    try:
        asyncio.run(serve(args.directory, args.host, args.port))
    except OSError as error:  # typically: the port is taken
        print(f"smtp-sink: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
