"""The local cluster's defaults, read from services/cluster.env (the file services/run-cluster.sh sources)."""

import pathlib
import re
import shlex

ROOT = pathlib.Path(__file__).resolve().parents[2]


def read_cluster_env() -> dict:
    values = {}
    for line in (ROOT / "services" / "cluster.env").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", key), f"cluster.env: not a KEY=value line: {line!r}"
        values[key] = " ".join(shlex.split(value))
    return values


CLUSTER = read_cluster_env()
SERVERS = CLUSTER["KINDRED_SERVERS"].split()
SERVERS_WITH_TABLES = CLUSTER["KINDRED_SERVERS_WITH_TABLES"].split()
DEFAULT_PORT_BASE = int(CLUSTER["KINDRED_DEFAULT_PORT_BASE"])
ADMIN_PORT_OFFSET = int(CLUSTER["KINDRED_ADMIN_PORT_OFFSET"])
DEFAULT_SMTP_PORT = int(CLUSTER["KINDRED_DEFAULT_SMTP_PORT"])
DATABASE = CLUSTER["KINDRED_DATABASE"]


def port(name: str, base: int = DEFAULT_PORT_BASE) -> int:
    return base + SERVERS.index(name)


def admin_port(name: str, base: int = DEFAULT_PORT_BASE) -> int:
    return base + ADMIN_PORT_OFFSET + SERVERS.index(name)


def declared_server_products() -> list:
    """The <name>-server executables Package.swift declares for names of KINDRED_SERVERS."""
    package = (ROOT / "Package.swift").read_text()
    declared = set(re.findall(r'\.executable\(name: "([a-z]+)-server"', package))
    return [name for name in SERVERS if name in declared]
