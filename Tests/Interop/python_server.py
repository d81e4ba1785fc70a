"""A Python grpcio implementation of kindred.testing.v1.InteropService, for the Kindred client's interop test.

Usage: python3 python_server.py  — prints "LISTENING 127.0.0.1:PORT", serves until stdin closes.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
stubs = tempfile.mkdtemp(prefix="kindred-pyserver-")
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}/proto", f"--python_out={stubs}",
                f"--grpc_python_out={stubs}", "kindred/testing/v1/interop.proto"], check=True)
sys.path.insert(0, stubs)

from kindred.testing.v1 import interop_pb2 as pb  # noqa: E402
from kindred.testing.v1 import interop_pb2_grpc as rpc  # noqa: E402

shutil.rmtree(stubs, ignore_errors=True)  # imported: the generated files are not needed any more (the server is killed)


class Interop(rpc.InteropServiceServicer):
    def _fail(self, request, context):
        if request.fail_with_code:
            code = next(c for c in grpc.StatusCode if c.value[0] == request.fail_with_code)
            context.abort(code, request.fail_with_message)

    def _echo(self, request, context, index=0):
        if request.delay_ms:
            time.sleep(request.delay_ms / 1000)
        self._fail(request, context)
        seen = sorted(f"{k}={v}" for k, v in context.invocation_metadata() if not k.endswith("-bin"))
        initial = [(k, v) for k, v in context.invocation_metadata() if k == "x-echo-initial"]
        trailing = [(k, v) for k, v in context.invocation_metadata() if k == "x-echo-trailing"]
        if initial:
            context.send_initial_metadata(initial)
        if trailing:
            context.set_trailing_metadata(trailing)
        return pb.EchoResponse(message=request.message, payload=request.payload, index=index, seen_metadata=seen)

    def Echo(self, request, context):
        return self._echo(request, context)

    def Expand(self, request, context):
        self._fail(request, context)
        for index in range(request.response_count):
            yield pb.EchoResponse(message=request.message, payload=b"k" * request.response_size, index=index)

    def Collect(self, request_iterator, context):
        response = pb.CollectResponse()
        for request in request_iterator:
            self._fail(request, context)
            response.count += 1
            response.joined += request.message
            response.payload_bytes += len(request.payload)
        return response

    def Chat(self, request_iterator, context):
        for index, request in enumerate(request_iterator):
            yield self._echo(request, context, index)


server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
rpc.add_InteropServiceServicer_to_server(Interop(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(f"LISTENING 127.0.0.1:{port}", flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), server.stop(0)), daemon=True).start()
server.wait_for_termination()
