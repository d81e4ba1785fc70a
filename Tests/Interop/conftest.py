"""Fixtures for the Python grpcio interop suite: generated stubs, a Kindred interop server, a test CA."""

import atexit
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTOS = [
    "kindred/testing/v1/interop.proto",
    "grpc/health/v1/health.proto",
    "grpc/reflection/v1alpha/reflection.proto",
    "grpc/reflection/v1/reflection.proto",
]

_stub_dir = tempfile.mkdtemp(prefix="kindred-stubs-")
atexit.register(shutil.rmtree, _stub_dir, ignore_errors=True)  # generated stubs, removed at exit
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={_stub_dir}",
     f"--grpc_python_out={_stub_dir}", *PROTOS],
    check=True,
)
sys.path.insert(0, _stub_dir)


def server_binary() -> pathlib.Path:
    if "KINDRED_BIN_PATH" in os.environ:
        path = pathlib.Path(os.environ["KINDRED_BIN_PATH"]) / "kindred-interop-server"
    else:
        bin_path = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout.strip()
        path = pathlib.Path(bin_path) / "kindred-interop-server"
    assert path.exists(), f"{path} is missing: run `swift build` first"
    return path


class RunningServer:
    def __init__(self, *args: str):
        self.process = subprocess.Popen([os.environ.get("KINDRED_INTEROP_SERVER", str(server_binary())), "--port", "0", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("LISTENING "):
            self.process.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.process.stderr.read()}")
        self.address = line.split()[1]
        self.port = int(self.address.rsplit(":", 1)[1])

    def resident_bytes(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture(scope="session")
def server():
    # No address penalty here: the flood tests of test_robustness.py share this server (and 127.0.0.1) with
    # every other test. test_abuse.py starts its own servers to test the penalty.
    running = RunningServer("--abuse-penalty", "0")
    yield running
    assert running.stop() == 0, "server did not exit cleanly on SIGTERM"


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """A throwaway CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    directory = tmp_path_factory.mktemp("certs")

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=Kindred Test CA", "-keyout", "ca.key", "-out", "ca.pem")
    for name, extension in [("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                            ("client", "extendedKeyUsage=clientAuth")]:
        (directory / f"{name}.ext").write_text(extension + "\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
    return directory


@pytest.fixture
def start_server():
    """Starts interop servers with extra arguments, one per call (e.g. for tests that measure its memory or
    get 127.0.0.1 penalised); stops them after the test."""
    started = []

    def start(*args: str) -> RunningServer:
        running = RunningServer(*args)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
