"""Distributed traces across the cluster: with the standard OTLP endpoint setting, every server exports its spans
to a collector (Tests/Peers/otlp_receiver.py, which parses them with the OpenTelemetry project's own protobuf
classes), and one Swipe through the gateway is one trace: the gateway's server span (a root of the cluster's own,
linked to the app's W3C `traceparent` rather than continuing it, so an app's sampling flag decides nothing), its
client call to match, match's server span, match's PostgreSQL statements, and the consumers'
handling of the events the swipe produced, each with the right parent. No span carries the members' ids, names or
other personal data."""
import json
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time

import pytest

from cluster_harness import ROOT, Cluster, assert_clean_stop
from test_cluster import TIMEOUT
from test_swipe_reach import LIKE, PARIS, Member, east, wait_indexed

from kindred.api.v1 import deck_pb2, deck_pb2_grpc  # noqa: E402

import grpc  # noqa: E402


@pytest.fixture(scope="module")
def collector():
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kindred-otlp-"))
    record = folder / "spans.jsonl"
    record.touch()
    process = subprocess.Popen([sys.executable, str(ROOT / "Tests" / "Peers" / "otlp_receiver.py"),
                                "--record", str(record)], stdout=subprocess.PIPE, text=True)
    port = int(process.stdout.readline().split()[1])
    yield port, record
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(collector):
    port, _ = collector
    running = Cluster(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_BSP_SCHEDULE_DELAY="100",
                      KINDRED_MATCH_SWIPE_RATE="1000", KINDRED_MATCH_SWIPE_BURST="1000")
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


def spans(record):
    lines = pathlib.Path(record).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def spans_until(record, select, until=bool, deadline=30.0):
    """The recorded spans `select` picks, once `until(them)` holds or the deadline passed (the servers send them in
    batches, after the fact)."""
    stop = time.monotonic() + deadline
    while True:
        found = [span for span in spans(record) if select(span)]
        if until(found) or time.monotonic() > stop:
            return found
        time.sleep(0.2)


def trace_of(record, trace_id, until):
    """The spans of `trace_id` once `until(spans)` holds."""
    return spans_until(record, lambda span: span.get("trace_id") == trace_id, until)


def linked_gateway_span(record, app_trace, caller_span):
    """The gateway's server span linked to the app's span `caller_span` of `app_trace`, once exported (or None)."""
    link = {"trace_id": app_trace, "span_id": caller_span}
    found = spans_until(record, lambda span: span["service"] == "gateway" and span["kind"] == "SERVER"
                        and link in span["links"])
    return found[0] if found else None


def only(found, description, **match):
    hits = [span for span in found if all(span.get(key) == value for key, value in match.items())]
    assert len(hits) == 1, f"expected one {description}, found {len(hits)}: {json.dumps(found, indent=1)}"
    return hits[0]


def descends_from(span, ancestor, by_id):
    while span["parent_span_id"]:
        if span["parent_span_id"] == ancestor["span_id"]:
            return True
        span = by_id.get(span["parent_span_id"])
        if span is None:
            return False
    return False


def test_one_swipe_is_one_trace_from_the_gateway_to_postgresql_and_the_consumers(cluster, collector):
    _, record = collector
    with grpc.insecure_channel(cluster.gateway) as channel:
        deck = deck_pb2_grpc.DeckServiceStub(channel)
        swiper = Member(cluster, channel, "Tia", 1996, PARIS)
        target = Member(cluster, channel, "Tom", 1995, east(3))
        for member in (swiper, target):
            wait_indexed(deck, member)
        # The app's own span: the gateway links to it and starts a trace of the cluster's own.
        app_trace, caller_span = secrets.token_hex(16), secrets.token_hex(8)
        traceparent = f"00-{app_trace}-{caller_span}-01"
        deck.Swipe(deck_pb2.SwipeRequest(target_user_id=target.id, action=LIKE),
                   metadata=swiper.auth + [("traceparent", traceparent)], timeout=TIMEOUT)
    linked = linked_gateway_span(record, app_trace, caller_span)
    assert linked is not None, "the gateway's span links to the app's"
    trace_id = linked["trace_id"]
    assert trace_id != app_trace and not linked["parent_span_id"], linked

    def complete(found):
        # Every server exports its own batches, each in the order its spans ended: the consumers' spans can arrive
        # before the gateway's, whose server span ends last. Wait for each span the checks below look for (match's
        # server span ends after its statements, so its batch or an earlier one holds them).
        return (any(s["service"] == "gateway" and s["kind"] == "SERVER" for s in found)
                and any(s["service"] == "match" and s["kind"] == "SERVER" for s in found)
                and any(s["service"] == "discovery" and s["kind"] == "CONSUMER"
                        and s["name"] == "event swipe.recorded" for s in found))

    found = trace_of(record, trace_id, complete)
    by_id = {span["span_id"]: span for span in found}

    gateway = only(found, "gateway server span", service="gateway", kind="SERVER",
                   name="kindred.api.v1.DeckService/Swipe")
    assert gateway["span_id"] == linked["span_id"]
    assert not [s for s in spans(record) if s["trace_id"] == app_trace], "a span in the app's trace"
    assert gateway["attributes"]["rpc.system"] == "grpc"
    assert gateway["attributes"]["rpc.service"] == "kindred.api.v1.DeckService"
    assert gateway["attributes"]["rpc.method"] == "Swipe"
    assert gateway["attributes"]["rpc.grpc.status_code"] == 0

    outgoing = only(found, "gateway→match client span", service="gateway", kind="CLIENT",
                    name="kindred.match.v1.MatchService/Swipe")
    assert outgoing["parent_span_id"] == gateway["span_id"]
    served = only(found, "match server span", service="match", kind="SERVER", name="kindred.match.v1.MatchService/Swipe")
    assert served["parent_span_id"] == outgoing["span_id"]
    assert served["attributes"]["rpc.grpc.status_code"] == 0

    statements = [s for s in found if s["service"] == "match" and s["attributes"].get("db.system") == "postgresql"]
    assert statements, "match's PostgreSQL statements are in the trace"
    for statement in statements:
        assert statement["kind"] == "CLIENT"
        assert descends_from(statement, served, by_id), statement
        assert statement["name"] == statement["attributes"]["db.operation.name"]
        assert "$1" in statement["attributes"]["db.query.text"] or "$" not in statement["attributes"]["db.query.text"]
    assert any(s["attributes"]["db.operation.name"] == "COMMIT" or "COMMIT" in s["attributes"]["db.query.text"]
               for s in statements), [s["name"] for s in statements]

    consumers = [s for s in found if s["kind"] == "CONSUMER" and s["name"] == "event swipe.recorded"]
    assert {s["service"] for s in consumers} >= {"discovery"}, [s["service"] for s in consumers]
    for consumer in consumers:
        # The event carried the swipe's trace: the consumer's span is a child of match's call.
        assert consumer["parent_span_id"] == served["span_id"], consumer
        if not cluster.on_nats:  # a NATS consumer pulls its events in no call of the relay's to link to
            assert consumer["links"], "linked to the DeliverEvents call it arrived in"

    # DESIGN §5–6: no personal data in telemetry (ids, names, tokens), whatever the span.
    text = json.dumps(spans(record))
    for secret in (swiper.id, target.id, "Tia", "Tom", swiper.auth[0][1].split()[-1]):
        assert secret not in text


def test_the_clusters_sampler_not_the_apps_flag_decides_what_is_traced(cluster, collector):
    """An app's `traceparent` marked not sampled (flags 00) is traced all the same under the cluster's sampler
    (always on here), in a trace of the cluster's own; were the gateway to continue the app's context, the app's
    flag would decide, and with a 01 flag it could have every one of its calls recorded under any sampler."""
    _, record = collector
    with grpc.insecure_channel(cluster.gateway) as channel:
        deck = deck_pb2_grpc.DeckServiceStub(channel)
        member = Member(cluster, channel, "Ula", 1994, PARIS)
        wait_indexed(deck, member)
        app_trace, caller_span = secrets.token_hex(16), secrets.token_hex(8)
        deck.GetDeck(deck_pb2.GetDeckRequest(page_size=5),
                     metadata=member.auth + [("traceparent", f"00-{app_trace}-{caller_span}-00")], timeout=TIMEOUT)
    linked = linked_gateway_span(record, app_trace, caller_span)
    assert linked is not None, "the call was not traced: the app's flag decided"
    assert linked["name"] == "kindred.api.v1.DeckService/GetDeck" and linked["trace_id"] != app_trace
