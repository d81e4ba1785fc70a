"""Helpers of the end-to-end tests: generated stubs of the public API, and whole clusters started with
services/run-cluster.sh (the README's command) on free ports, in temporary folders, with the binaries of
KINDRED_BIN_PATH (no build)."""

import atexit
import email
import email.policy
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from cluster_config import ADMIN_PORT_OFFSET, SERVERS

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTOS = sorted(
    str(path.relative_to(ROOT / "proto"))
    for folder in ("kindred/api/v1", "kindred/common/v1", "kindred/discovery/v1")
    for path in (ROOT / "proto" / folder).glob("*.proto")
)

_stub_dir = tempfile.mkdtemp(prefix="kindred-cluster-stubs-")
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={_stub_dir}",
     f"--grpc_python_out={_stub_dir}", *PROTOS],
    check=True,
)
sys.path.insert(0, _stub_dir)
atexit.register(shutil.rmtree, _stub_dir, True)

START_TIMEOUT = 120
# The tests sign in and up far more often from 127.0.0.1 than one person would; the gateway's and auth's
# per-address limits (tested in Tests/KindredGatewayTests and KindredAuthTests) are lifted for them.
RELAXED_LIMITS = {
    "KINDRED_GATEWAY_CLIENT_RATE": "100000", "KINDRED_GATEWAY_CLIENT_BURST": "100000",
    "KINDRED_GATEWAY_ANONYMOUS_RATE": "100000", "KINDRED_GATEWAY_ANONYMOUS_BURST": "100000",
    "KINDRED_GATEWAY_ACCOUNT_RATE": "100000", "KINDRED_GATEWAY_ACCOUNT_BURST": "100000",
    "KINDRED_AUTH_IP_REQUESTS_PER_MINUTE": "100000", "KINDRED_AUTH_MAIL_PER_IP_PER_HOUR": "100000",
}


# Scale-out mode (Cluster(scale_out=True), or every cluster of a run with KINDRED_TEST_SCALE_OUT=1): two replicas
# of the gateway and of every service but discovery, discovery as SCALE_OUT_SHARDS shards, events on three NATS
# JetStream nodes. Writes that wait for their consumers get longer through JetStream on this 2-core machine: 4 s,
# still under the gateway's 5 s downstream deadline, so a wait that runs out answers UNAVAILABLE, not a timeout.
REPLICATED = ("gateway", "auth", "profile", "match", "chat", "notify")  # discovery runs once per shard (its index)
SCALE_OUT_SHARDS = 3
SCALE_OUT_ENV = {**{f"KINDRED_REPLICAS_{name.upper()}": "2" for name in REPLICATED},
                 "KINDRED_PROFILE_PROPAGATION_MS": "4000", "KINDRED_MATCH_MATCH_PROPAGATION_MS": "4000",
                 "KINDRED_MATCH_BLOCK_PROPAGATION_MS": "4000"}
SCALE_OUT_ARGS = ("--nats", f"--discovery-shards={SCALE_OUT_SHARDS}")


def bin_dir() -> pathlib.Path:
    if "KINDRED_BIN_PATH" in os.environ:
        return pathlib.Path(os.environ["KINDRED_BIN_PATH"])
    return pathlib.Path(subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True,
                                       capture_output=True, text=True).stdout.strip())


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_port_range() -> tuple:
    try:
        low, high = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port_base() -> tuple:
    """A port base whose gRPC, admin and media ports are all free, and a free SMTP port. Two clusters may run at
    once (a test starting its own beside the module's), so every port one of them binds is checked. The bases lie
    below the kernel's ephemeral range (ip_local_port_range, 32768 and up by default): a port chosen inside it could
    be taken by any outgoing connection (to PostgreSQL, between the services) before the cluster binds it."""
    first_ephemeral = ephemeral_port_range()[0]
    highest_base = min(first_ephemeral, 65536) - 3 * ADMIN_PORT_OFFSET - 10
    for _ in range(200):
        base = 20050 + 10 * random.randrange(0, max(1, (highest_base - 20050) // 10))
        ports = [base + i for i in range(len(SERVERS))] + [base + ADMIN_PORT_OFFSET + i for i in range(len(SERVERS))]
        smtp = base + ADMIN_PORT_OFFSET + 50
        media = base + 2 * ADMIN_PORT_OFFSET  # the gateway's media port (run-cluster.sh: port base + 200)
        push_peers = [base + 3 * ADMIN_PORT_OFFSET + i for i in range(3)]  # APNs, FCM, Web Push: base + 300..302
        nats = [base + 3 * ADMIN_PORT_OFFSET + 10 + i for i in range(6)]  # --nats: base + 310..315
        if all(port_is_free(p) for p in ports + [smtp, media] + push_peers + nats):
            return base, smtp
    raise RuntimeError("no free port range found")


def replica_port(base: int, name: str, replica: int, admin: bool = False) -> int:
    """run-cluster.sh's port of replica r >= 2 of server i: slot s = 3i + r - 2 at base + 10 (1 + s / 3) + 7 + s % 3
    (admin: 100 above)."""
    slot = 3 * SERVERS.index(name) + replica - 2
    return base + (ADMIN_PORT_OFFSET if admin else 0) + 10 * (1 + slot // 3) + 7 + slot % 3


def scale_out_port_base() -> tuple:
    """A port base where a scale-out cluster's ports are free too: the second replicas' (and the second gateway's
    media port, base + 207) and the shards' (base + 20 + i, admin + 120 + i)."""
    for _ in range(50):
        base, smtp = free_port_base()
        more = [replica_port(base, name, 2, admin) for name in REPLICATED for admin in (False, True)] + [base + 207]
        more += [base + offset + shard for offset in (20, 20 + ADMIN_PORT_OFFSET)
                 for shard in range(1, SCALE_OUT_SHARDS)]
        if all(port_is_free(port) for port in more):
            return base, smtp
    raise RuntimeError("no free port range for a scale-out cluster")


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def processes_mentioning(text: str) -> list:
    """Pids whose command line contains text (e.g. this cluster's data folder)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in command and process_alive(int(entry.name)):
                found.append((int(entry.name), command))
    return found


class Cluster:
    """One run of services/run-cluster.sh."""

    def __init__(self, folder: pathlib.Path = None, wait: bool = True, ports: tuple = None, args: tuple = (),
                 scale_out: bool = None, **extra_env: str):
        """Starts run-cluster.sh in `folder` (a new temporary one by default; an old one = a restart on the same
        data) on `ports` (port base, SMTP port; free ones by default) with the script's `args` (e.g. --demo) and,
        with `wait`, returns once it printed "Kindred is up". `scale_out` (default: KINDRED_TEST_SCALE_OUT=1 in
        the environment) runs it scaled out (SCALE_OUT_ARGS and SCALE_OUT_ENV under the test's own settings)."""
        if scale_out is None:
            scale_out = os.environ.get("KINDRED_TEST_SCALE_OUT") == "1" and "--nats" not in args \
                and not any(name.startswith("KINDRED_REPLICAS_") for name in extra_env)
        if scale_out:
            args = (*SCALE_OUT_ARGS, *args)
            extra_env = {**SCALE_OUT_ENV, **extra_env}
        self.on_nats = "--nats" in args  # events on NATS JetStream, not the push relay
        self.base, self.smtp_port = ports or (scale_out_port_base() if scale_out else free_port_base())
        # Readable by the postgres user (PostgreSQL runs as postgres when the tests run as root).
        self.folder = folder or pathlib.Path(tempfile.mkdtemp(prefix="kindred-cluster-"))
        self.folder.chmod(0o755)
        self.run_dir = self.folder / "run"
        self.data_dir = self.folder / "data"
        self.mail_dir = self.run_dir / "mail"
        self.env = dict(os.environ, KINDRED_BIN_DIR=str(bin_dir()), KINDRED_CLUSTER_DIR=str(self.run_dir),
                        KINDRED_DATA_DIR=str(self.data_dir), KINDRED_PORT_BASE=str(self.base),
                        KINDRED_SMTP_PORT=str(self.smtp_port),
                        # A test run killed hard (no finally runs) takes its clusters with it.
                        **{"KINDRED_STOP_WITH_PID": str(os.getpid()), **RELAXED_LIMITS, **extra_env})
        self.lines = []
        self.up = threading.Event()
        # The tests stop the cluster with Ctrl-C (SIGINT). A test run started in the background (CI jobs often
        # are) inherits SIGINT ignored, and bash cannot trap a signal ignored on entry: give the script the
        # default disposition, as a terminal would. `env --default-signal` does it in the child without running
        # Python between fork and exec (a preexec_fn is unsafe beside the test process's threads: grpcio's fork
        # handlers ran in the child and the script never started).
        command = ["env", "--default-signal=INT,TERM,QUIT", str(ROOT / "services" / "run-cluster.sh"), *args]
        self.process = subprocess.Popen(command, cwd=ROOT, env=self.env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read_output, daemon=True)
        self.reader.start()
        if not wait:
            return
        deadline = time.monotonic() + START_TIMEOUT
        while not self.up.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop(force_cleanup=True)
                raise RuntimeError("the cluster did not come up:\n" + self.output())

    def _read_output(self):
        announced = False
        for line in self.process.stdout:
            self.lines.append(line)
            announced = announced or line.startswith(f"Kindred is up: gateway at 127.0.0.1:{self.base}")
            if announced and line.startswith("Ctrl-C stops the cluster."):  # the summary's last line
                self.up.set()

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_exit(self, timeout: float = 60) -> int:
        status = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return status

    def databases(self) -> list:
        """(psql, url, services) of every PostgreSQL server from the summary's db: lines; services is None for the
        only server of a one-server cluster, "standby" for the standby."""
        found = []
        for line in self.lines:
            match = re.match(r'\s*db:\s+(\S+) "(.+?)"(?:\s+\((.+)\))?\s*$', line)
            if match:
                psql, url, services = match.groups()
                found.append((psql, url, services.split() if services and services != "standby" else services))
        return found

    def database(self, sql: str, server: str = None) -> tuple:
        """(psql, url) of the server to run sql on: `server` ("standby", or a service whose server it is), else the
        server holding the schemas sql names (schema.table), else the first one."""
        databases = self.databases()
        if server == "standby":
            return next((p, u) for p, u, s in databases if s == "standby")
        primaries = [(p, u, s) for p, u, s in databases if s != "standby"]
        if len(primaries) == 1:
            return primaries[0][:2]
        wanted = {server} if server else set(re.findall(rf"\b({'|'.join(SERVERS)})\.[a-z_]+", sql))
        holding = [(p, u) for p, u, s in primaries if wanted & set(s)]
        if len(holding) > 1:
            raise AssertionError(f"{sql!r} names schemas on {len(holding)} servers")
        return holding[0] if holding else primaries[0][:2]

    def psql(self, sql: str, user: str = "postgres", server: str = None) -> str:
        """Runs SQL in the cluster's database through a psql line run-cluster.sh prints (unix socket), on the server
        that holds the schemas it names (see database())."""
        psql, url = self.database(sql, server)
        url = url.replace("postgresql://postgres@", f"postgresql://{user}@", 1)
        result = subprocess.run([psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql, url],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip())
        return result.stdout.strip()

    def port(self, name: str) -> int:
        if name.startswith("discovery_"):  # shard i of --discovery-shards: base + 20 + i
            return self.base + 20 + int(name.removeprefix("discovery_"))
        return self.base + SERVERS.index(name)

    def discovery_shards(self) -> list:
        """The discovery servers, shard order: discovery, then discovery_1, ... when it runs as shards."""
        return ["discovery"] + sorted((name for name in self.pids() if name.startswith("discovery_")),
                                      key=lambda name: int(name.removeprefix("discovery_")))

    def admin_port(self, name: str) -> int:
        return self.base + ADMIN_PORT_OFFSET + SERVERS.index(name)

    @property
    def gateway(self) -> str:
        return f"127.0.0.1:{self.port('gateway')}"

    def pids(self) -> dict:
        """name -> pid from the cluster's pids file (run-cluster, postgres, smtp-sink, auth, gateway, ...)."""
        lines = (self.run_dir / "pids").read_text().split("\n")
        return {name: int(pid) for name, pid in (line.split() for line in lines if line.strip())}

    def servers(self) -> list:
        return [name for name in self.pids() if name in SERVERS]

    def wait_for_mail(self, address: str, subject: str = "Confirm your email address", timeout: float = 30) -> str:
        """The plain-text body of the newest mail to address with this subject (the sink's .eml files)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in sorted(self.mail_dir.glob("mail-*.eml"), reverse=True):
                message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
                if address in message["X-RcptTo"] and message["Subject"] == subject:
                    return message.get_body(preferencelist=("plain",)).get_content()
            time.sleep(0.05)
        raise AssertionError(f"no mail {subject!r} to {address} within {timeout} s")

    def verification_code(self, address: str) -> str:
        code = re.search(r"code in the app: (\d{6})", self.wait_for_mail(address))
        assert code, "the verification mail has no 6-digit code"
        # The sink logged the same code (its log line may land a moment after the .eml file: poll briefly).
        expected = (f"to={address} ", f"code={code.group(1)}")
        deadline = time.monotonic() + 10
        while True:
            sink_log = (self.run_dir / "logs" / "smtp-sink.log").read_text()
            if all(part in sink_log for part in expected):
                return code.group(1)
            assert time.monotonic() < deadline, f"the sink never logged {expected}"
            time.sleep(0.05)

    def stop(self, force_cleanup: bool = False, timeout: float = 90) -> int:
        """Ctrl-C (SIGINT) and wait; returns the script's exit status. With force_cleanup (a failed start),
        whatever of the cluster is still running afterwards is killed."""
        try:
            pids = self.pids()
        except (FileNotFoundError, ValueError):
            pids = {}
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # The script has exited, but its last lines ("Kindred stopped.") may still be in the pipe: read them all.
        self.reader.join(timeout=10)
        if force_cleanup:
            for pid in self.leftovers(pids):
                os.kill(pid, signal.SIGKILL)
        return self.process.returncode

    def leftovers(self, pids: dict) -> list:
        """Processes of this cluster still running: of the pids recorded while it ran, or naming its folders."""
        return sorted({pid for pid in pids.values() if process_alive(pid)}
                      | {pid for pid, _ in processes_mentioning(str(self.folder))})


def assert_clean_stop(running: Cluster, pids: dict, exited_before: tuple = (), keep_folder: bool = False):
    """Ctrl-C: the script exits 0, every server reports exit 0, nothing of the cluster is left running."""
    status = running.stop()
    output = running.output()
    left = running.leftovers(pids)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert status == 0, f"run-cluster.sh exited {status} after Ctrl-C:\n{output}"
    assert not left, f"processes left after Ctrl-C: {left}\n{output}"
    for name in pids:
        if name in SERVERS:
            expected = f"  {name} had exited before (status 0)" if name in exited_before else f"  {name} stopped (exit 0)"
            assert expected in output, output
    assert "  postgres stopped" in output and "Kindred stopped." in output, output
    if not keep_folder and not os.environ.get("KINDRED_KEEP_CLUSTER"):  # set: logs stay for a look after a run
        shutil.rmtree(running.folder, ignore_errors=True)
