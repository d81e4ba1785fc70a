"""Python grpcio as an independent client of the Kindred gRPC runtime."""

import threading
import time
import uuid

import grpc
import pytest

from kindred.testing.v1 import interop_pb2 as pb
from kindred.testing.v1 import interop_pb2_grpc as rpc
from grpc.health.v1 import health_pb2, health_pb2_grpc

LIMIT = 4 * 1024 * 1024


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.address) as channel:
        yield rpc.InteropServiceStub(channel)


def test_unary_echo_with_metadata_both_ways(stub):
    response, call = stub.Echo.with_call(
        pb.EchoRequest(message="héllo", payload=b"\x00\x01\xff"),
        metadata=[("x-token", "abc"), ("x-trace-bin", b"\x00\xffbinary"),
                  ("x-echo-initial", "from-headers"), ("x-echo-trailing", "from-trailers")],
    )
    assert response.message == "héllo"
    assert response.payload == b"\x00\x01\xff"
    assert "x-token=abc" in response.seen_metadata
    assert "x-trace-bin=AP9iaW5hcnk" in response.seen_metadata  # base64 of the binary value, unpadded
    assert ("x-echo-initial", "from-headers") in call.initial_metadata()
    assert ("x-echo-trailing", "from-trailers") in call.trailing_metadata()


def test_server_streaming(stub):
    responses = list(stub.Expand(pb.EchoRequest(message="s", response_count=200, response_size=1000)))
    assert [r.index for r in responses] == list(range(200))
    assert all(len(r.payload) == 1000 for r in responses)


def test_client_streaming(stub):
    requests = (pb.EchoRequest(message=str(i), payload=b"x" * i) for i in range(100))
    response = stub.Collect(requests)
    assert response.count == 100
    assert response.joined == "".join(str(i) for i in range(100))
    assert response.payload_bytes == sum(range(100))


def test_bidirectional_streaming_in_order(stub):
    requests = (pb.EchoRequest(message=f"m{i}") for i in range(50))
    assert [r.message for r in stub.Chat(requests)] == [f"m{i}" for i in range(50)]


@pytest.mark.parametrize("code", [c for c in grpc.StatusCode if c != grpc.StatusCode.OK])
def test_error_status_and_message(stub, code):
    message = f"failed: {code.name} ✗ 100% sure\nsecond line"
    with pytest.raises(grpc.RpcError) as error:
        stub.Echo(pb.EchoRequest(fail_with_code=code.value[0], fail_with_message=message))
    assert error.value.code() == code
    assert error.value.details() == message


def test_status_details_bin_passed_through(stub):
    details = bytes(range(256))
    with pytest.raises(grpc.RpcError) as error:
        stub.Echo(pb.EchoRequest(fail_with_code=9, fail_with_message="with details"),
                  metadata=[("x-echo-details-bin", details)])
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert ("grpc-status-details-bin", details) in error.value.trailing_metadata()


def wait_for_cancellation(stub, call_id):
    for _ in range(100):
        state = stub.GetCancellationState(pb.CancellationQuery(call_id=call_id))
        if state.cancelled and state.finished:
            return state
        time.sleep(0.05)
    if not state.started:  # the deadline passed before the server ran the handler (a starved machine): as good
        return state
    raise AssertionError(f"handler of {call_id} was not cancelled: {state}")


def test_deadline_exceeded_cancels_the_handler(stub):
    call_id = str(uuid.uuid4())
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as error:
        stub.Echo(pb.EchoRequest(delay_ms=20000), timeout=0.3, metadata=[("x-call-id", call_id)])
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 10
    wait_for_cancellation(stub, call_id)


def test_client_cancellation_cancels_the_handler(stub):
    call_id = str(uuid.uuid4())
    future = stub.Echo.future(pb.EchoRequest(delay_ms=10000), metadata=[("x-call-id", call_id)])
    time.sleep(0.3)
    assert future.cancel()
    wait_for_cancellation(stub, call_id)


def test_message_just_under_the_size_limit(stub):
    # field 2 (tag 1 byte + 4-byte varint length) + payload: 5 bytes of overhead.
    request = pb.EchoRequest(payload=b"u" * (LIMIT - 5))
    assert request.ByteSize() == LIMIT
    assert stub.Collect(iter([request])).payload_bytes == LIMIT - 5


def test_message_just_over_the_size_limit(stub):
    request = pb.EchoRequest(payload=b"o" * (LIMIT - 4))
    assert request.ByteSize() == LIMIT + 1
    with pytest.raises(grpc.RpcError) as error:
        stub.Collect(iter([request]))
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_thousand_concurrent_calls_on_one_channel(stub):
    futures = [stub.Echo.future(pb.EchoRequest(message=str(i), delay_ms=20)) for i in range(1000)]
    assert [f.result(timeout=60).message for f in futures] == [str(i) for i in range(1000)]


def test_unknown_method_is_unimplemented(server):
    with grpc.insecure_channel(server.address) as channel:
        call = channel.unary_unary("/kindred.testing.v1.InteropService/Nope")
        with pytest.raises(grpc.RpcError) as error:
            call(b"")
        assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
        call = channel.unary_unary("/kindred.nothing.v1.Missing/Echo")
        with pytest.raises(grpc.RpcError) as error:
            call(b"")
        assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_health_check_and_watch(server):
    with grpc.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        serving = health_pb2.HealthCheckResponse.SERVING
        assert health.Check(health_pb2.HealthCheckRequest()).status == serving
        assert health.Check(health_pb2.HealthCheckRequest(service="kindred.testing.v1.InteropService")).status == serving
        with pytest.raises(grpc.RpcError) as error:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=5)
        assert next(watch).status == serving
        watch.cancel()


def test_reflection_lists_and_describes_services(server):
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
    from google.protobuf.descriptor_pool import DescriptorPool

    with grpc.insecure_channel(server.address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = set(database.get_services())
        assert {"kindred.testing.v1.InteropService", "grpc.health.v1.Health"} <= services
        pool = DescriptorPool(database)
        service = pool.FindServiceByName("kindred.testing.v1.InteropService")
        assert {m.name for m in service.methods} >= {"Echo", "Expand", "Collect", "Chat"}
        assert pool.FindMessageTypeByName("kindred.testing.v1.EchoRequest").fields_by_name["payload"].number == 2


def test_reflection_v1(server):
    # grpcio-reflection ships v1alpha's messages only; v1's are wire-identical, so they serve for v1 here.
    from grpc_reflection.v1alpha import reflection_pb2

    with grpc.insecure_channel(server.address) as channel:
        info = channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                     request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                     response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        responses = list(info(iter([
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="kindred.testing.v1.InteropService.Echo"),
            reflection_pb2.ServerReflectionRequest(file_by_filename="no/such.proto"),
        ])))
        names = {s.name for s in responses[0].list_services_response.service}
        assert "grpc.reflection.v1.ServerReflection" in names
        assert responses[1].file_descriptor_response.file_descriptor_proto
        assert responses[2].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_tls_with_test_ca(certs):
    from conftest import RunningServer

    tls_server = RunningServer("--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"))
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=(certs / "ca.pem").read_bytes())
        with grpc.secure_channel(f"localhost:{tls_server.port}", credentials) as channel:
            assert rpc.InteropServiceStub(channel).Echo(pb.EchoRequest(message="tls")).message == "tls"
        # A client trusting another CA must fail the handshake.
        with grpc.secure_channel(f"localhost:{tls_server.port}", grpc.ssl_channel_credentials(
                root_certificates=(certs / "client.pem").read_bytes())) as channel:
            with pytest.raises(grpc.RpcError) as error:
                rpc.InteropServiceStub(channel).Echo(pb.EchoRequest(message="x"), timeout=5)
            assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert tls_server.stop() == 0


def test_mutual_tls(certs):
    from conftest import RunningServer

    tls_server = RunningServer("--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key"),
                               "--client-ca", str(certs / "ca.pem"))
    try:
        ca = (certs / "ca.pem").read_bytes()
        with_cert = grpc.ssl_channel_credentials(root_certificates=ca, private_key=(certs / "client.key").read_bytes(),
                                                 certificate_chain=(certs / "client.pem").read_bytes())
        with grpc.secure_channel(f"localhost:{tls_server.port}", with_cert) as channel:
            assert rpc.InteropServiceStub(channel).Echo(pb.EchoRequest(message="mtls")).message == "mtls"
        with grpc.secure_channel(f"localhost:{tls_server.port}", grpc.ssl_channel_credentials(ca)) as channel:
            with pytest.raises(grpc.RpcError) as error:
                rpc.InteropServiceStub(channel).Echo(pb.EchoRequest(message="x"), timeout=5)
            assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert tls_server.stop() == 0


def test_graceful_shutdown_finishes_in_flight_calls():
    from conftest import RunningServer

    victim = RunningServer()
    with grpc.insecure_channel(victim.address) as channel:
        stub = rpc.InteropServiceStub(channel)
        assert stub.Echo(pb.EchoRequest(message="warm")).message == "warm"
        future = stub.Echo.future(pb.EchoRequest(message="in-flight", delay_ms=700))
        time.sleep(0.2)
        exit_code = []
        stopper = threading.Thread(target=lambda: exit_code.append(victim.stop()))
        stopper.start()
        assert future.result(timeout=10).message == "in-flight"
        stopper.join()
        assert exit_code == [0]
        with pytest.raises(grpc.RpcError) as error:
            stub.Echo(pb.EchoRequest(message="late"), timeout=2)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE


def test_client_streaming_megabyte_messages_at_the_default_window(stub):
    # ~1 MB messages against the runtime's default 1 MiB stream window: before the flow-control fix the stream
    # stalled after the first message until the request-body timeout reset it (CANCELLED after 30 s).
    started = time.monotonic()
    response = stub.Collect(iter([pb.EchoRequest(payload=b"x" * 1_000_000) for _ in range(4)]), timeout=20)
    assert (response.count, response.payload_bytes) == (4, 4_000_000)
    assert time.monotonic() - started < 10
