#!/usr/bin/env python3
"""An OpenTelemetry collector's OTLP/HTTP traces endpoint: POST /v1/traces with an ExportTraceServiceRequest in
binary protobuf (`application/x-protobuf`, optionally gzip), parsed with the `opentelemetry-proto` package (the
OpenTelemetry project's own generated classes, independent of Kindred's code), answered with an empty
ExportTraceServiceResponse. Every span received is appended to --record FILE as one JSON line: service name (from
the resource), trace_id, span_id, parent_span_id (hex, "" for a root), name, kind (SERVER, CLIENT, CONSUMER…),
attributes (as plain values), status code and links ([{trace_id, span_id}]). Anything else is answered 404 (wrong
path) or 415 (not protobuf) and recorded as {"refused": …}.

    otlp_receiver.py --record spans.jsonl [--port 0]     prints "LISTENING <port>" once it accepts requests
"""
import argparse
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2


def plain(value):
    """An OTLP AnyValue as a JSON value."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: plain(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def spans_of(request):
    for resource_spans in request.resource_spans:
        resource = {item.key: plain(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "service": resource.get("service.name"),
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": trace_pb2.Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                    "attributes": {item.key: plain(item.value) for item in span.attributes},
                    "status": trace_pb2.Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
                    "links": [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()} for link in span.links],
                    "start_unix_nano": span.start_time_unix_nano,
                    "end_unix_nano": span.end_time_unix_nano,
                }


class Receiver(BaseHTTPRequestHandler):
    lock = threading.Lock()
    record = None

    def log_message(self, *args):
        pass

    def write(self, entry):
        with self.lock, open(self.record, "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path != "/v1/traces":
            self.write({"refused": f"path {self.path}"})
            return self.answer(404, b"")
        if self.headers.get("content-type") != "application/x-protobuf":
            self.write({"refused": f"content-type {self.headers.get('content-type')}"})
            return self.answer(415, b"")
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        for span in spans_of(request):
            self.write(span)
        self.answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    Receiver.record = args.record
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Receiver)
    print(f"LISTENING {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
