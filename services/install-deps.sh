#!/usr/bin/env bash
# Installs what building and testing Kindred needs on Debian/Ubuntu: the C libraries, protoc and protoc-c,
# the PostgreSQL server, h2load, valgrind and time (benchmarks), the Python packages of the interop tests, and the tools the cluster tests use
# (docker-compose validates compose.yaml without a Docker engine; shellcheck lints the shell scripts; chromium and
# chromium-driver run the web app's browser test) and the backup scripts (rsync copies photo files, zstd
# compresses archived WAL), and nats-server (the JetStream event bus, in tests and `run-cluster.sh --nats`).
# As root it installs what is missing; otherwise it prints the command to run and fails.
set -euo pipefail

DEBIAN_PACKAGES=(
    pkg-config libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libprotobuf-dev
    libssl-dev openssl libpq-dev libargon2-dev argon2 postgresql nghttp2-client python3-pip docker-compose shellcheck
    libvips-dev libvips-tools chromium chromium-driver valgrind time rsync zstd nats-server
)
PYTHON_PACKAGES=(grpcio grpcio-tools grpcio-health-checking grpcio-reflection protobuf pytest pytest-xdist h2 cryptography aiosmtpd pyyaml
    pillow piexif exifread pillow-heif openapi-spec-validator
    schemathesis selenium connectrpc httpx http-ece standardwebhooks opentelemetry-proto nats-py)

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "Installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "Missing Debian packages. Run: sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
fi

if ! python3 -c "import grpc, grpc_tools, grpc_health, grpc_reflection, google.protobuf, pytest, xdist, h2, cryptography, aiosmtpd, yaml, PIL, piexif, exifread, pillow_heif, openapi_spec_validator, schemathesis, selenium, connectrpc, httpx, http_ece, standardwebhooks, opentelemetry.proto, nats" 2>/dev/null; then
    echo "Installing Python packages: ${PYTHON_PACKAGES[*]}"
    python3 -m pip install -q "${PYTHON_PACKAGES[@]}" 2>/dev/null \
        || python3 -m pip install -q --break-system-packages "${PYTHON_PACKAGES[@]}"
fi
