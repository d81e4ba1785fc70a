"""compose.yaml and services/Dockerfile agree with the native cluster (services/cluster.env, run-cluster.sh)
and with Package.swift. No Docker engine is needed: docker-compose validates and interpolates the file, and
the structure is checked on the parsed YAML."""

import asyncio
import glob
import os
import pwd
import random
import re
import shutil
import stat
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

from cluster_config import (
    ADMIN_PORT_OFFSET,
    DATABASE,
    DEFAULT_PORT_BASE,
    DEFAULT_SMTP_PORT,
    ROOT,
    SERVERS_WITH_TABLES,
    admin_port,
    declared_server_products,
    port,
)
from cluster_harness import port_is_free

COMPOSE_FILE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "services" / "Dockerfile"
RUN_CLUSTER = ROOT / "services" / "run-cluster.sh"
GENERATE_SECRETS = ROOT / "services" / "secrets" / "generate-secrets.sh"
KINDRED_IMAGE = "kindred:dev"
SECRETS_FOLDER = "/run/kindred-secrets"
# Settings that hold a secret: a password, a service secret, a key, or a database URL (it carries the password).
SECRET_SETTING = re.compile(r"PASSWORD|SECRET|_KEY(_|$)|DATABASE_URL")

# The servers this repository builds today; a server of cluster.env without an executable is not required yet.
SERVERS_BUILT = declared_server_products()
# The PostgreSQL servers of compose and the services whose schemas each holds (run-cluster.sh --databases 2).
DATABASE_SERVERS = {"postgres": ["auth", "profile", "discovery"], "postgres-2": ["match", "chat", "notify"]}
# Discovery's shards (run-cluster.sh --discovery-shards=3): compose service -> run-cluster's name for it.
DISCOVERY_SHARDS = {"discovery": "discovery", "discovery-1": "discovery_1", "discovery-2": "discovery_2"}
# The JetStream nodes (run-cluster.sh --nats).
NATS_NODES = ["nats", "nats-2", "nats-3"]
NATS_CLIENT_PORT, NATS_ROUTE_PORT = 4222, 6222


def database_server_of(name):
    return next(server for server, names in DATABASE_SERVERS.items() if name in names)


def interpolate(value):
    """Compose's ${VAR:-default} / ${VAR-default} / ${VAR} with an empty environment: the defaults."""
    if isinstance(value, str):
        def replace(match):
            assert match.group(2) is not None, f"{match.group(0)} has no default: compose would need it set"
            return match.group(3)
        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}", replace, value)
    if isinstance(value, list):
        return [interpolate(item) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item) for key, item in value.items()}
    return value


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(raw):
    return interpolate(raw["services"])


def environment(service) -> dict:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def compose_command():
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


def test_docker_compose_accepts_the_file_and_agrees_with_this_parse(services):
    command = compose_command()
    if command is None:
        pytest.skip("neither docker-compose nor `docker compose` is installed (services/install-deps.sh adds it)")
    # Without KINDRED_* from the caller's environment, compose fills in the documented defaults.
    env = {key: value for key, value in os.environ.items() if not key.startswith("KINDRED_")}
    check = subprocess.run([*command, "-f", str(COMPOSE_FILE), "config", "-q"], cwd=ROOT, env=env,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    rendered = subprocess.run([*command, "-f", str(COMPOSE_FILE), "config"], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=True).stdout
    config = yaml.safe_load(rendered)["services"]
    assert set(config) == set(services)
    for name, service in services.items():
        assert environment(config[name]) == environment(service), name
        assert config[name].get("depends_on", {}) == service.get("depends_on", {}), name


def test_every_service_is_there(services):
    expected = {"secrets", *DATABASE_SERVERS, *NATS_NODES, "smtp-sink", *SERVERS_BUILT, *DISCOVERY_SHARDS,
                *(f"{name}-migrate" for name in {*SERVERS_WITH_TABLES, *DISCOVERY_SHARDS})}
    assert expected <= set(services), f"missing: {expected - set(services)}"
    unexpected = set(services) - expected
    assert not unexpected, f"services compose has but the native cluster does not: {unexpected}"


def test_services_with_tables_match_migrations_folders(services):
    folders = sorted(p.parent.name for p in (ROOT / "services").glob("*/migrations") if p.is_dir())
    assert folders == sorted(SERVERS_WITH_TABLES), "services/cluster.env KINDRED_SERVERS_WITH_TABLES vs folders"
    for name in SERVERS_WITH_TABLES:
        assert list((ROOT / "services" / name / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")), name
    held = []
    for server, names in DATABASE_SERVERS.items():
        postgres_env = environment(services[server])
        assert postgres_env["KINDRED_SERVERS_WITH_TABLES"].split() == names
        assert postgres_env["POSTGRES_DB"] == DATABASE == postgres_env["KINDRED_DATABASE"]
        held += names
    assert held == SERVERS_WITH_TABLES, "every service's schema on exactly one server"
    # The same split as the native cluster's --databases 2.
    layout = subprocess.run(["bash", "-c", 'source services/postgres/servers.sh; database_layout 2 "$0"; '
                             'printf "%s\n" "${DB_GROUPS[@]}"', " ".join(SERVERS_WITH_TABLES)],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    assert [group.split() for group in layout] == list(DATABASE_SERVERS.values())


@pytest.mark.parametrize("server", DATABASE_SERVERS)
def test_postgres_runs_the_shared_role_script_and_is_health_checked(services, server):
    postgres = services[server]
    assert postgres["image"].startswith("postgres:")
    mounts = [volume.split(":") for volume in postgres["volumes"]]
    assert ["./services/postgres/init-roles.sh", "/docker-entrypoint-initdb.d/10-init-roles.sh", "ro"] in mounts
    test = postgres["healthcheck"]["test"]
    assert test[0] == "CMD" and "pg_isready" in test and test[test.index("-h") + 1] == "127.0.0.1"
    assert "synchronous_commit=on" in postgres["command"]
    for name in SERVERS_WITH_TABLES:
        assert (f"KINDRED_{name.upper()}_DB_PASSWORD_FILE" in environment(postgres)) == \
            (name in DATABASE_SERVERS[server]), name
    assert postgres["depends_on"] == {"secrets": {"condition": "service_completed_successfully"}}


def test_postgres_archives_wal_into_its_volume_as_the_native_cluster_does(raw, services, tmp_path):
    """The entrypoint compose gives PostgreSQL (run here with the image's entrypoint replaced by a recorder) hands
    the image's entrypoint the command plus services/postgres/wal-archive.sh's archive settings for the archive
    folder, which is a volume of its own (one per server), made the postgres user's; `off` turns archiving off."""
    volumes = set()
    for server in DATABASE_SERVERS:
        mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in services[server]["volumes"]}
        entrypoint = services[server]["entrypoint"]
        assert entrypoint[0] == "bash" and mounts[entrypoint[1]] == "./services/postgres/compose-entrypoint.sh"
        folder = os.path.dirname(entrypoint[1])
        assert mounts[f"{folder}/wal-archive.sh"] == "./services/postgres/wal-archive.sh"
        archive = environment(services[server])["KINDRED_WAL_ARCHIVE_DIR"]
        assert mounts[archive] in raw["volumes"] and mounts["/var/lib/postgresql/data"] in raw["volumes"]
        volumes |= {mounts[archive], mounts["/var/lib/postgresql/data"]}
        assert environment(services[server])["KINDRED_WAL_ARCHIVE_TIMEOUT"] == "60"
        assert services[server]["command"] == services["postgres"]["command"]
    assert len(volumes) == 2 * len(DATABASE_SERVERS), "each server its own data and archive volumes"
    postgres = services["postgres"]

    recorder = tmp_path / "bin" / "docker-entrypoint.sh"
    recorder.parent.mkdir()
    recorder.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$RECORDED"\n')
    recorder.chmod(0o755)
    script = ROOT / "services" / "postgres" / "compose-entrypoint.sh"

    def started_with(archive_dir):
        env = dict(os.environ, PATH=f"{recorder.parent}:{os.environ['PATH']}", RECORDED=str(tmp_path / "args"),
                   KINDRED_WAL_ARCHIVE_DIR=archive_dir, KINDRED_WAL_ARCHIVE_TIMEOUT="60")
        subprocess.run(["bash", str(script), *postgres["command"]], env=env, check=True)
        return (tmp_path / "args").read_text().splitlines()

    def archive_command(archive_dir):
        return subprocess.run(["bash", "-c", 'source services/postgres/wal-archive.sh; wal_archive_command "$0"',
                               archive_dir], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert started_with("off") == [*postgres["command"], "-c", "archive_mode=off"]
    if os.geteuid() != 0:
        pytest.skip("the archive folder is handed to the postgres user: run as root, as the container does")
    local = str(tmp_path / "wal-archive")
    assert started_with(local) == [*postgres["command"], "-c", "archive_mode=on",
                                   "-c", f"archive_command={archive_command(local)}", "-c", "archive_timeout=60"]
    state = os.stat(local)
    assert stat.S_IMODE(state.st_mode) == 0o700 and state.st_uid == pwd.getpwnam("postgres").pw_uid


def test_servers_are_health_checked_by_their_own_healthcheck_command(services):
    for name in SERVERS_BUILT:
        service = services[name]
        assert service["image"] == KINDRED_IMAGE
        assert service["command"] == [f"{name}-server", "serve"]
        assert service["healthcheck"]["test"] == ["CMD", f"{name}-server", "healthcheck"]
        assert service["restart"] == "unless-stopped"
    assert services["smtp-sink"]["healthcheck"]["test"][0] == "CMD"


def test_start_order_through_depends_on(services):
    for name in SERVERS_WITH_TABLES:
        migrate = services[f"{name}-migrate"]
        assert migrate["command"] == [f"{name}-server", "migrate"]
        assert migrate["depends_on"] == {database_server_of(name): {"condition": "service_healthy"}}
        assert migrate["restart"] == "no", "a one-shot step must not restart"
        assert environment(migrate) == environment(services[name]), "migrate and serve must see the same settings"
        assert services[name]["depends_on"][f"{name}-migrate"] == {"condition": "service_completed_successfully"}
    assert services["auth"]["depends_on"]["smtp-sink"]["condition"] in ("service_healthy", "service_started")
    gateway_needs = services["gateway"]["depends_on"]
    for name in SERVERS_BUILT:
        if name != "gateway":
            assert gateway_needs[name] == {"condition": "service_healthy"}, name


def test_only_the_gateway_publishes_ports(services):
    for name, service in services.items():
        assert "network_mode" not in service, name
        if name != "gateway":
            assert "ports" not in service, f"{name} publishes a port"
    published, media = services["gateway"]["ports"]
    replicas = services["gateway"]["deploy"]["replicas"]

    def host_ports(mapping, container):
        """The host ports a published range gives the gateway's replicas, one each, all for `container`."""
        host, host_range, container_port = mapping.split("#")[0].strip().rsplit(":", 2)
        assert host == "127.0.0.1", "the dev default publishes on loopback only"
        assert int(container_port) == container
        first, last = (int(p) for p in host_range.split("-"))
        assert last - first + 1 == replicas, f"{mapping}: one host port per gateway replica"
        return list(range(first, last + 1))

    assert host_ports(published, port("gateway"))[0] == port("gateway")
    # The media port: signed photo URLs (profile's media base URL) and the web app, whose origins may call the API.
    media_ports = host_ports(media, port("gateway") + 2 * ADMIN_PORT_OFFSET)
    assert media_ports[0] == port("gateway") + 2 * ADMIN_PORT_OFFSET
    assert environment(services["profile"])["KINDRED_PROFILE_MEDIA_BASE_URL"].endswith(f":{media_ports[0]}")
    gateway = environment(services["gateway"])
    assert gateway["KINDRED_GATEWAY_WEB_ROOT"] == "/app/web"
    origins = gateway["KINDRED_GATEWAY_CORS_ORIGINS"]
    for media_port in media_ports:
        assert f"http://127.0.0.1:{media_port}" in origins, origins


def test_ports_and_addresses_match_the_native_defaults(services):
    for name in SERVERS_BUILT:
        env = environment(services[name])
        assert env[f"KINDRED_{name.upper()}_LISTEN"] == f"0.0.0.0:{port(name)}"
        assert env[f"KINDRED_{name.upper()}_ADMIN_LISTEN"] == f"0.0.0.0:{admin_port(name)}"
    gateway = environment(services["gateway"])
    for name in SERVERS_BUILT:
        if name != "gateway":
            assert gateway[f"KINDRED_GATEWAY_{name.upper()}_ADDRESS"] == f"{name}:{port(name)}"
    auth = environment(services["auth"])
    assert auth["KINDRED_AUTH_SMTP_HOST"] == "smtp-sink" and int(auth["KINDRED_AUTH_SMTP_PORT"]) == DEFAULT_SMTP_PORT
    assert auth["KINDRED_AUTH_SMTP_SECURITY"] == "none"
    sink = services["smtp-sink"]["command"]
    assert int(sink[sink.index("--port") + 1]) == DEFAULT_SMTP_PORT
    for name in SERVERS_BUILT:
        if name not in ("auth",):
            assert auth[f"KINDRED_AUTH_SERVICE_SECRET_{name.upper()}_FILE"] == \
                environment(services[name])[f"KINDRED_{name.upper()}_SERVICE_SECRET_FILE"], name
    assert DEFAULT_PORT_BASE == 50050 and ADMIN_PORT_OFFSET == 100, "the documented defaults"


def generated_secrets(services, folder) -> dict:
    """Runs the secrets service's script as compose would (its environment) into `folder`: name -> content."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KINDRED_")},
           **environment(services["secrets"])}
    subprocess.run(["bash", str(GENERATE_SECRETS), str(folder)], env=env, check=True, capture_output=True)
    return {path.name: path.read_text() for path in folder.iterdir()}


def test_database_urls_use_each_services_own_role(services, tmp_path):
    secrets = generated_secrets(services, tmp_path)
    for name in SERVERS_WITH_TABLES:
        url_file = environment(services[name])[f"KINDRED_{name.upper()}_DATABASE_URL_FILE"]
        assert url_file.startswith(SECRETS_FOLDER + "/"), name
        url = urllib.parse.urlsplit(secrets[url_file.rsplit("/", 1)[1]])
        server = database_server_of(name)
        assert (url.scheme, url.username, url.hostname, url.port, url.path) == (
            "postgresql", f"kindred_{name}", server, 5432, f"/{DATABASE}")
        password_file = environment(services[server])[f"KINDRED_{name.upper()}_DB_PASSWORD_FILE"]
        assert url.password == secrets[password_file.rsplit("/", 1)[1]], "the role's password and the URL must agree"
        assert environment(services[name])[f"KINDRED_{name.upper()}_MIGRATIONS_DIR"] == f"/app/services/{name}/migrations"


def secret_files_named(raw, services) -> set:
    """The generated secrets compose names; fails on any secret written in compose.yaml itself."""
    text = COMPOSE_FILE.read_text()
    for match in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}", text):
        assert not SECRET_SETTING.search(match.group(1)), f"a secret from the caller's environment: {match.group(0)}"
    anchors = [interpolate(value) for key, value in raw.items() if key.startswith("x-") and isinstance(value, dict)]
    listings = [environment(service) for service in services.values()]
    listings += [{k: str(v) for k, v in anchor.items() if isinstance(v, (str, int))} for anchor in anchors]
    named = set()
    for env in listings:
        for key, value in env.items():
            if not SECRET_SETTING.search(key):
                continue
            assert key.endswith("_FILE"), f"{key} holds a secret literally: name a file with {key}_FILE"
            assert value.startswith(SECRETS_FOLDER + "/"), f"{key} must name a generated secret"
            named.add(value.rsplit("/", 1)[1])
    for name, service in services.items():
        if any(value.startswith(SECRETS_FOLDER) for value in environment(service).values()):
            mode = "rw" if name == "secrets" else "ro"
            mount = f"secrets:{SECRETS_FOLDER}" + (":ro" if mode == "ro" else "")
            assert mount in service.get("volumes", []), f"{name} must mount the secrets volume ({mode})"
    return named


def test_no_secret_is_written_in_compose(raw, services):
    """Every secret setting names a file of the generated `secrets` volume; none has a value, or a default, that
    anyone can read here."""
    assert secret_files_named(raw, services)


def test_the_secrets_service_generates_each_named_secret_once(raw, services, tmp_path):
    secrets = services["secrets"]
    assert secrets["image"] == KINDRED_IMAGE and secrets["restart"] == "no"
    assert secrets["command"] == ["bash", "/generate-secrets.sh", SECRETS_FOLDER]
    assert "./services/secrets/generate-secrets.sh:/generate-secrets.sh:ro" in secrets["volumes"]
    assert environment(secrets)["KINDRED_SERVERS_WITH_TABLES"].split() == SERVERS_WITH_TABLES
    first = generated_secrets(services, tmp_path / "a")
    named = secret_files_named(raw, services)
    assert named <= set(first), f"named but never generated: {named - set(first)}"
    for name, value in first.items():
        assert (tmp_path / "a" / name).stat().st_mode & 0o777 == stat.S_IRUSR, name
        if not name.startswith("database-url-"):
            assert re.fullmatch(r"[A-Za-z0-9_-]{43}", value), name  # 256 random bits
    # Kept at the next start; another deployment gets other values.
    assert generated_secrets(services, tmp_path / "a") == first
    other = generated_secrets(services, tmp_path / "b")
    assert all(other[name] != first[name] for name in first)
    assert len(set(first.values())) == len(first), "every secret is its own"


def test_shared_settings_come_from_x_anchors(raw, services):
    assert {"x-kindred-image", "x-logging", "x-server"} <= set(raw)
    logging = interpolate(raw["x-logging"])
    for name, service in services.items():
        assert service["logging"] == logging, name
        if name not in (*DATABASE_SERVERS, *NATS_NODES, "smtp-sink"):
            assert service["image"] == KINDRED_IMAGE
            assert service["build"] == {"context": ".", "dockerfile": "services/Dockerfile", "target": "runtime"}


def native_settings():
    """KINDRED_* names run-cluster.sh sets per server: the common ones of server_env_common (by the naming
    convention KINDRED_<NAME>_*; some only for servers with tables), those of its server_env_<name> function,
    and the gateway's address of every other server."""
    text = RUN_CLUSTER.read_text()
    common = re.search(r"^server_env_common\(\) \{\n(.*?)^\}", text, re.S | re.M).group(1)
    always, with_tables = common.split("if has_tables")
    suffixes = lambda body: re.findall(r'"\$\{prefix\}_([A-Z0-9_]+)=', body)  # noqa: E731
    assert suffixes(always) and suffixes(with_tables), "server_env_common changed shape: update this test"
    found = {}
    for name in SERVERS_BUILT:
        keys = {f"KINDRED_{name.upper()}_{suffix}" for suffix in suffixes(always)}
        if name in SERVERS_WITH_TABLES:
            keys |= {f"KINDRED_{name.upper()}_{suffix}" for suffix in suffixes(with_tables)}
        own = re.search(rf"^server_env_{name}\(\) \{{\n(.*?)^\}}", text, re.S | re.M)
        if own:
            keys |= set(re.findall(r"\b(KINDRED_[A-Z0-9_]+)=", own.group(1)))
            if "KINDRED_GATEWAY_${name^^}_ADDRESS" in own.group(1):
                keys |= {f"KINDRED_GATEWAY_{other.upper()}_ADDRESS" for other in SERVERS_BUILT if other != name}
        found[name] = keys
    return found


def test_compose_sets_what_the_native_cluster_sets(services):
    native = native_settings()
    assert "KINDRED_AUTH_SMTP_PORT" in native["auth"] and "KINDRED_GATEWAY_AUTH_ADDRESS" in native["gateway"]
    for name in SERVERS_BUILT:
        present = set(environment(services[name]))
        missing = {key for key in native[name] if key not in present and f"{key}_FILE" not in present}
        assert not missing, f"{name}: compose lacks {missing}"


# ---- services/Dockerfile ----

def dockerfile_products():
    """Runs the Dockerfile's own product selection against this checkout's Package.swift."""
    text = DOCKERFILE.read_text()
    match = re.search(r'products="\$\((.*?)\) kindred"', text, re.S)
    assert match, "the Dockerfile's product list moved: update this test"
    command = match.group(1).replace("\\\n", " ")
    output = subprocess.run(["sh", "-c", command], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return output.split() + ["kindred"]


def test_dockerfile_builds_every_server_product_and_the_cli():
    products = dockerfile_products()
    assert sorted(products) == sorted([f"{name}-server" for name in SERVERS_BUILT] + ["kindred"])
    assert "--static-swift-stdlib" in DOCKERFILE.read_text()


def test_dockerfile_installs_every_system_library():
    text = DOCKERFILE.read_text()
    build, runtime = text.split("AS runtime")
    apt = re.findall(r'apt: \["([^"]+)"\]', (ROOT / "Package.swift").read_text())
    assert apt, "Package.swift lists its apt providers"
    runtime_package = {"libnghttp2-dev": "libnghttp2-14", "libprotobuf-c-dev": "libprotobuf-c1",
                       "libssl-dev": "libssl3", "libpq-dev": "libpq5", "libargon2-dev": "libargon2-1",
                       "libvips-dev": "libvips42"}
    for package in apt:
        assert re.search(rf"\b{re.escape(package)}\b", build), f"build stage lacks {package}"
        assert package in runtime_package, f"add the runtime library of {package} to this test and the Dockerfile"
        assert re.search(rf"\b{re.escape(runtime_package[package])}\b", runtime), runtime_package[package]
    assert "-dev" not in re.sub(r"#.*", "", runtime), "the runtime stage needs no -dev packages"
    assert re.search(r"^USER kindred$", runtime, re.M), "servers run as a non-root user"


def test_dockerfile_ships_the_migrations_where_compose_looks():
    text = DOCKERFILE.read_text()
    assert "for migrations in services/*/migrations" in text and "WORKDIR /app" in text
    for name in SERVERS_WITH_TABLES:
        assert f"KINDRED_{name.upper()}_MIGRATIONS_DIR=/app/services/{name}/migrations" in text or name != "auth"
        assert (ROOT / "services" / name / "migrations").is_dir()


def test_dockerignore_keeps_build_products_and_data_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for pattern in [".build*", ".data", ".cluster", ".git"]:
        assert pattern in ignored, pattern


# ---- shell scripts ----

@pytest.mark.parametrize("script", ["services/run-cluster.sh", "services/postgres/init-roles.sh",
                                    "services/install-deps.sh", "Tests/Fuzz/campaign.sh", "services/backup.sh",
                                    "services/restore.sh", "services/postgres/wal-archive.sh",
                                    "services/postgres/compose-entrypoint.sh", "services/postgres/servers.sh"])
def test_shell_scripts_parse_and_pass_shellcheck(script):
    subprocess.run(["bash", "-n", script], cwd=ROOT, check=True)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (services/install-deps.sh adds it)")
    lint = subprocess.run(["shellcheck", "-x", script], cwd=ROOT, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_every_server_but_discovery_runs_two_replicas(services):
    """deploy.replicas: their clients reach every replica through the service's DNS name, and each gateway replica
    publishes one port of its range; a discovery shard holds one index."""
    for name in ("gateway", "auth", "profile", "match", "chat", "notify"):
        assert services[name].get("deploy", {}).get("replicas") == 2, name
        assert "container_name" not in services[name], name
    for name in DISCOVERY_SHARDS:
        assert services[name].get("deploy", {}).get("replicas", 1) == 1, name


# ---- scale-out: discovery's shards and NATS JetStream, as run-cluster.sh --discovery-shards=3 --nats ----

def run_cluster_functions(*names) -> str:
    """The definitions of run-cluster.sh's functions `names`, to run on their own."""
    text = RUN_CLUSTER.read_text()
    found = []
    for name in names:
        match = re.search(rf"^{name}\(\) \{{[^\n]*\}}$", text, re.M) or \
            re.search(rf"^{name}\(\) \{{.*?^\}}$", text, re.S | re.M)
        assert match, f"run-cluster.sh has no function {name}: update this test"
        found.append(match.group(0))
    return "\n".join(found)


def native_sharded() -> dict:
    """What run-cluster.sh gives a cluster with three discovery shards (its own functions, with the default ports):
    each shard's settings, the callers' shard list, each producer's consumers, the schemas PostgreSQL makes."""
    script = f"""set -euo pipefail
source services/cluster.env
fail() {{ echo "$*" >&2; exit 1; }}
secret() {{ echo "secret-$1"; }}
read -r -a SERVERS <<<"$KINDRED_SERVERS"
PORT_BASE=$KINDRED_DEFAULT_PORT_BASE DISCOVERY_SHARD_COUNT={len(DISCOVERY_SHARDS)}
{run_cluster_functions("port_of", "replicas_of", "instances_of", "addresses_of", "discovery_shard_names",
                       "discovery_shard_port", "discovery_shard_addresses", "discovery_shards_env",
                       "discovery_shard_setting", "server_env_discovery", "server_env_discovery_shard",
                       "event_consumers", "extra_schemas_of")}
server_env_common() {{ SERVER_ENV=(); }}
echo "schemas=$(extra_schemas_of "$KINDRED_SERVERS_WITH_TABLES")"
echo "shards=$(discovery_shard_addresses)"
for producer in $KINDRED_SERVERS; do echo "consumers $producer=$(event_consumers "$producer")"; done
SERVER_ENV=(); server_env_discovery; printf 'discovery %s\\n' "${{SERVER_ENV[@]}}"
for shard in $(discovery_shard_names); do
    server_env_discovery_shard "$shard"; printf "$shard %s\\n" "${{SERVER_ENV[@]}}"
done
"""
    output = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    native = {"consumers": {}, "shard_env": {name: {} for name in DISCOVERY_SHARDS.values()}}
    for line in output.splitlines():
        if line.startswith(("schemas=", "shards=")):
            key, value = line.split("=", 1)
            native[key] = value.split() if key == "schemas" else value.split(",")
        elif line.startswith("consumers "):
            producer, value = line[len("consumers "):].split("=", 1)
            native["consumers"][producer] = value
        else:
            shard, setting = line.split(" ", 1)
            key, value = setting.split("=", 1)
            native["shard_env"][shard][key] = value
    native["callers"] = sorted(set(re.findall(r"^\s*discovery_shards_env (\w+)$", RUN_CLUSTER.read_text(), re.M)))
    assert native["callers"] and native["schemas"], "run-cluster.sh changed shape: update this test"
    return native


def listening_service(services, port_number) -> str:
    """The compose service whose server listens on `port_number` (not its migration step)."""
    owners = [name for name, service in services.items()
              if service.get("command", [None])[-1] == "serve"
              and any(key.endswith("_LISTEN") and value == f"0.0.0.0:{port_number}"
                      for key, value in environment(service).items())]
    assert len(owners) == 1, f"port {port_number}: {owners}"
    return owners[0]


def as_native(services, address) -> str:
    """compose's service:port as run-cluster's 127.0.0.1:port, once the service is the one listening there."""
    host, port_number = address.rsplit(":", 1)
    assert listening_service(services, int(port_number)) == host, f"{address}: {host} does not listen there"
    return f"127.0.0.1:{port_number}"


def test_each_discovery_shard_has_run_clusters_settings_and_its_own_migrated_schema(services):
    native = native_sharded()
    assert set(native["shard_env"]) == set(DISCOVERY_SHARDS.values())
    schemas = set()
    for name, shard in DISCOVERY_SHARDS.items():
        env = environment(services[name])
        for key, value in native["shard_env"][shard].items():
            if key.endswith("_LISTEN"):
                value = value.replace("127.0.0.1:", "0.0.0.0:")
            if key.endswith("_ADDRESS") or key.endswith("SECRET") or key.endswith("_KEY"):
                continue  # addresses and secrets: the tests above
            assert env.get(key) == value, f"{name}: {key} is {env.get(key)!r}, run-cluster.sh gives {value!r}"
        # The schema each serves from: its own (shard 0 discovery's), on the server holding discovery's.
        schemas.add(env.get("KINDRED_DISCOVERY_DATABASE_SCHEMA", "discovery"))
        assert env["KINDRED_DISCOVERY_DATABASE_URL_FILE"] == \
            environment(services["discovery"])["KINDRED_DISCOVERY_DATABASE_URL_FILE"], "one role, kindred_discovery"
        # Its migration step: the same settings, so it migrates the shard's schema.
        migrate = services[f"{name}-migrate"]
        assert migrate["command"] == ["discovery-server", "migrate"] and migrate["restart"] == "no"
        assert environment(migrate) == env, f"{name}-migrate must migrate {name}'s schema"
        assert migrate["depends_on"] == {database_server_of("discovery"): {"condition": "service_healthy"}}
        assert services[name]["command"] == ["discovery-server", "serve"]
        assert services[name]["healthcheck"]["test"] == ["CMD", "discovery-server", "healthcheck"]
        assert services[name]["depends_on"][f"{name}-migrate"] == {"condition": "service_completed_successfully"}
        assert services["gateway"]["depends_on"][name] == {"condition": "service_healthy"}
    assert len(schemas) == len(DISCOVERY_SHARDS), "every shard its own projection schema"
    # init-roles.sh makes the shards' schemas, owned by discovery's role, where run-cluster.sh makes them.
    postgres = environment(services[database_server_of("discovery")])
    assert postgres.get("KINDRED_EXTRA_SCHEMAS", "").split() == native["schemas"]
    assert sorted(pair.split(":")[1] for pair in native["schemas"]) == sorted(schemas - {"discovery"})
    for server in DATABASE_SERVERS:
        if server != database_server_of("discovery"):
            assert "KINDRED_EXTRA_SCHEMAS" not in environment(services[server]), server


def test_callers_route_over_every_shard_in_shard_order(services):
    native = native_sharded()
    for caller in native["callers"]:
        key = f"KINDRED_{caller.upper()}_DISCOVERY_SHARDS"
        listed = environment(services[caller]).get(key)
        assert listed is not None, f"{caller} lacks {key}"
        assert [as_native(services, address) for address in listed.split(",")] == native["shards"], caller
        assert listed.split(",")[0].split(":")[0] == "discovery", "shard 0 is the discovery service"


def test_every_producer_delivers_to_every_shard_under_its_own_name(services):
    native = native_sharded()
    for producer, expected in native["consumers"].items():
        key = f"KINDRED_{producer.upper()}_EVENT_CONSUMERS"
        if not expected:
            assert key not in environment(services[producer]), producer
            continue
        listed = environment(services[producer]).get(key)
        assert listed is not None, f"{producer} lacks {key}"
        as_run_cluster = []
        for entry in listed.split(","):
            consumer, address = entry.split("=", 1)
            as_run_cluster.append(f"{consumer}={as_native(services, address)}")
        assert ",".join(as_run_cluster) == expected, producer
    assert any("discovery_1=" in value for value in native["consumers"].values())


def test_nats_jetstream_runs_as_a_three_node_cluster(raw, services):
    """Each node: the official image at a pinned 2.x tag, JetStream on with its store in a volume of its own, routes
    to every other node in one cluster, health-checked, not published."""
    text = RUN_CLUSTER.read_text()
    assert re.search(r"^start_nats\(\) \{\n\s+local node\n\s+for node in 0 1 2; do", text, re.M), \
        "run-cluster.sh's JetStream cluster changed: update this test"
    stores, names = set(), set()
    for node in NATS_NODES:
        service = services[node]
        assert re.fullmatch(r"nats:2\.\d+\.\d+(-alpine)?", service["image"]), service["image"]
        assert service["image"] == services[NATS_NODES[0]]["image"]
        command = service["command"]

        def option(*flags):
            present = [flag for flag in flags if flag in command]
            assert present, f"{node} lacks {flags[0]}"
            return command[command.index(present[0]) + 1] if present[0] != "-js" else True

        assert option("-js", "--jetstream")
        store = option("-sd", "--store_dir")
        mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in service["volumes"]}
        assert mounts.get(store) in raw["volumes"], f"{node}: its JetStream store must be a named volume"
        stores.add(mounts[store])
        names.add(option("-n", "--server_name"))
        assert option("--cluster_name") == "kindred"
        assert option("--cluster") == f"nats://0.0.0.0:{NATS_ROUTE_PORT}"
        routes = option("--routes").split(",")
        assert sorted(routes) == sorted(f"nats://{other}:{NATS_ROUTE_PORT}" for other in NATS_NODES if other != node)
        monitor = option("-m", "--http_port")
        assert service["healthcheck"]["test"][0] == "CMD" and \
            f"http://127.0.0.1:{monitor}/healthz" in service["healthcheck"]["test"]
        assert service["restart"] == "unless-stopped" and "ports" not in service
    assert len(stores) == len(names) == len(NATS_NODES), "every node its own store and name"


def test_every_server_is_given_the_nats_cluster_and_waits_for_it(services):
    """run-cluster.sh --nats gives every server KINDRED_EVENTS_NATS_URL naming every node; compose gives each the
    same list, and each server that has events starts once every node is healthy."""
    expected = [f"nats://{node}:{NATS_CLIENT_PORT}" for node in NATS_NODES]
    assert '[ -z "$NATS_URL" ] || SERVER_ENV+=("KINDRED_EVENTS_NATS_URL=$NATS_URL")' in RUN_CLUSTER.read_text()
    for name in [*SERVERS_BUILT, *DISCOVERY_SHARDS]:
        for service in (name, f"{name}-migrate"):
            if service not in services:
                continue
            url = environment(services[service]).get("KINDRED_EVENTS_NATS_URL")
            assert url is not None, f"{service} lacks KINDRED_EVENTS_NATS_URL"
            assert url.split(",") == expected, service
        if name != "gateway":
            for node in NATS_NODES:
                assert services[name]["depends_on"].get(node) == {"condition": "service_healthy"}, f"{name} on {node}"


def nats_on_loopback(services, node, ports, store) -> list:
    """`node`'s compose command for a nats-server on loopback: each node's client, monitoring and route ports
    (`ports[name]`) where compose gives every container its own address, its store in `store`."""
    command = list(services[node]["command"])
    values = {"-sd": str(store), "-m": str(ports[node]["monitor"]),
              "--cluster": f"nats://127.0.0.1:{ports[node]['route']}"}
    assert command[command.index("--cluster") + 1] == f"nats://0.0.0.0:{NATS_ROUTE_PORT}"
    for flag, value in values.items():
        command[command.index(flag) + 1] = value
    routes = command.index("--routes") + 1
    command[routes] = ",".join(
        f"nats://127.0.0.1:{ports[urllib.parse.urlsplit(route).hostname]['route']}"
        for route in command[routes].split(","))
    return ["-a", "127.0.0.1", "-p", str(ports[node]["client"]), *command]


def test_the_nats_nodes_form_a_jetstream_cluster_with_composes_commands(services, tmp_path):
    """The three nodes' commands, run with Debian's nats-server on loopback (the ports moved apart, as compose's
    containers each have their own address): every node answers the compose health check, and a stream with three
    replicas (as the producers' streams have) is placed on all three and drops a repeated message id."""
    server = shutil.which("nats-server") or next(iter(glob.glob("/usr/sbin/nats-server")), None)
    if server is None:
        pytest.skip("nats-server is not installed (services/install-deps.sh adds it)")
    taken, ports = set(), {}
    for node in NATS_NODES:
        ports[node] = {}
        for kind in ("client", "monitor", "route"):
            while (candidate := random.randrange(20000, 30000)) in taken or not port_is_free(candidate):
                pass
            taken.add(candidate)
            ports[node][kind] = candidate
    health = services[NATS_NODES[0]]["healthcheck"]["test"][-1]
    processes = []
    try:
        for node in NATS_NODES:
            log = open(tmp_path / f"{node}.log", "w")
            processes.append(subprocess.Popen([server, *nats_on_loopback(services, node, ports, tmp_path / node)],
                                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

        def healthy(node):
            url = health.replace(f":{services[node]['command'][services[node]['command'].index('-m') + 1]}/",
                                 f":{ports[node]['monitor']}/")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    return response.status == 200
            except (urllib.error.URLError, OSError):
                return False

        deadline = time.monotonic() + 60
        while not all(healthy(node) for node in NATS_NODES):
            assert all(process.poll() is None for process in processes), \
                {node: (tmp_path / f"{node}.log").read_text()[-2000:] for node in NATS_NODES}
            assert time.monotonic() < deadline, "the nodes did not all answer their health check"
            time.sleep(0.2)

        async def replicated_stream():
            import nats  # nats-py, as test_nats.py uses it
            from nats.js.api import StreamConfig
            urls = [f"nats://127.0.0.1:{ports[node]['client']}" for node in NATS_NODES]
            connection = await nats.connect(servers=urls, connect_timeout=5)
            try:
                js = connection.jetstream()
                for _ in range(100):  # the meta leader may still be settling
                    try:
                        await js.add_stream(StreamConfig(name="COMPOSE_CHECK", subjects=["compose.>"], num_replicas=3,
                                                         duplicate_window=120.0))
                        break
                    except nats.errors.Error:
                        await asyncio.sleep(0.5)
                first = await js.publish("compose.check", b"1", headers={"Nats-Msg-Id": "event-1"})
                again = await js.publish("compose.check", b"1", headers={"Nats-Msg-Id": "event-1"})
                info = await js.stream_info("COMPOSE_CHECK")
                return first, again, info
            finally:
                await connection.close()

        first, again, info = asyncio.run(replicated_stream())
        assert not first.duplicate and again.duplicate and info.state.messages == 1
        assert info.config.num_replicas == 3
        placed = {info.cluster.leader, *(replica.name for replica in info.cluster.replicas or [])}
        assert placed == {services[node]["command"][services[node]["command"].index("-n") + 1] for node in NATS_NODES}
    finally:
        for process in processes:
            process.kill()
            process.wait()


def test_each_postgres_allows_the_connections_run_cluster_sizes_for_the_same_layout(services):
    """run-cluster.sh's max_connections_for, with compose's replicas and shards, for the services each server holds:
    compose's max_connections is at least that (a replica or shard added here must not run PostgreSQL out)."""
    replicas = {f"KINDRED_REPLICAS_{name.upper()}": str(services[name].get("deploy", {}).get("replicas", 1))
                for name in SERVERS_BUILT}
    for server, names in DATABASE_SERVERS.items():
        script = f"""set -euo pipefail
fail() {{ echo "$*" >&2; exit 1; }}
DISCOVERY_SHARD_COUNT={len(DISCOVERY_SHARDS)}
{run_cluster_functions("replicas_of", "max_connections_for")}
max_connections_for "{' '.join(names)}"
"""
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("KINDRED_")}, **replicas}
        needed = int(subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                                    check=True).stdout)
        command = services[server]["command"]
        allowed = int(next(value.split("=", 1)[1] for value in command if value.startswith("max_connections=")))
        assert allowed >= needed, f"{server}: max_connections={allowed}, run-cluster.sh sizes {needed} for {names}"
