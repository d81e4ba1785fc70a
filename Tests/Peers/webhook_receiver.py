#!/usr/bin/env python3
"""A webhook receiver of an app team's backend: verifies every delivery with the `standardwebhooks` package (the
Standard Webhooks reference library for Python, independent of Kindred's code), on an HTTP/2 TLS server (`h2`).

POST /hooks/<name>: the body is verified against each secret --secrets FILE lists for <name> (a JSON object
{"<name>": ["whsec_…", …]}, re-read when it changes) with `standardwebhooks.Webhook(secret).verify`, which checks
`webhook-id`, `webhook-timestamp` (at most 5 minutes off) and `webhook-signature`. A delivery no secret verifies
(a bad signature, an old timestamp, a missing header) is refused with 400; one that verifies is answered 204, or
what --rules says for <name> (500, 429 with "retry_after", 410, "delay_ms" before answering; "times" = that many
times, then normal again). Each request is recorded as a JSON line: the target, webhook-id, timestamp, the
signature header, which of the secrets verified it ("verified_with": indexes into the target's list), the parsed
body, the status answered and, when refused, why."""
import asyncio
import json
import os

import standardwebhooks

from h2_peer import Recorder, Response, Rules, common_arguments, serve


class Secrets:
    """The secrets per target, from a JSON file re-read when it changes."""

    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.secrets = {}

    def of(self, target):
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return []
        if mtime != self.mtime:
            with open(self.path) as handle:
                self.secrets = json.load(handle)
            self.mtime = mtime
        return self.secrets.get(target, [])


class WebhookReceiver:
    def __init__(self, args):
        self.recorder = Recorder(args.record)
        self.rules = Rules(args.rules)
        self.secrets = Secrets(args.secrets)

    def handle(self, request):
        if request.method != "POST" or not request.path.startswith("/hooks/"):
            return Response(404, b"")
        target = request.path[len("/hooks/"):]
        headers = {name: value for name, value in request.headers.items() if not name.startswith(":")}
        entry = {"target": target, "webhook_id": headers.get("webhook-id"),
                 "timestamp": headers.get("webhook-timestamp"), "signature": headers.get("webhook-signature"),
                 "content_type": headers.get("content-type")}
        body = bytes(request.body)
        verified_with, reasons, payload = [], [], None
        for index, secret in enumerate(self.secrets.of(target)):
            try:
                payload = standardwebhooks.Webhook(secret).verify(body, headers)
                verified_with.append(index)
            except Exception as error:  # WebhookVerificationError, or a malformed header
                reasons.append(f"{type(error).__name__}: {error}")
        entry["verified_with"] = verified_with
        if not verified_with:
            entry.update(status=400, refused=reasons or ["no secret for this target"])
            self.recorder.record(entry)
            return Response(400, {"error": "signature not verified"})
        entry["body"] = payload
        if headers.get("content-type") != "application/json":
            entry.update(status=415, refused=["content-type is not application/json"])
            self.recorder.record(entry)
            return Response(415, b"")
        rule = self.rules.for_target(target) or {}
        status = rule.get("status", 204)
        answer_headers = [("retry-after", str(rule["retry_after"]))] if "retry_after" in rule else []
        entry["status"] = status
        entry["delay_ms"] = rule.get("delay_ms", 0)
        self.recorder.record(entry)
        response = Response(status, b"", answer_headers)
        if rule.get("delay_ms"):
            asyncio.get_running_loop().call_later(rule["delay_ms"] / 1000, request.respond, response)
            return None
        return response


def main():
    parser = common_arguments(__doc__)
    parser.add_argument("--secrets", required=True, help='JSON file {"<name>": ["whsec_…", …]}')
    args = parser.parse_args()
    serve(args, WebhookReceiver(args).handle)


if __name__ == "__main__":
    main()
