#!/usr/bin/env bash
# Sign-in latency of auth-server at the real Argon2id parameters (m=19 MiB, t=2, p=1): starts a private
# PostgreSQL (unix socket in a temp folder), migrates, serves, creates one verified account, and runs
# services/auth/bench_signin.py at 1 and 8 concurrent clients. Compare with the Fusion app's 0.646 s sign-in.
#
#   services/auth/bench-signin.sh              # release build (slow to build the first time)
#   AUTH_SERVER=.build-auth/debug/auth-server services/auth/bench-signin.sh   # an existing binary
set -euo pipefail
cd "$(dirname "$0")/../.."
REQUESTS="${REQUESTS:-200}"
if [[ -z "${AUTH_SERVER:-}" ]]; then
    swift build -c release --product auth-server >/dev/null
    AUTH_SERVER="$(swift build -c release --show-bin-path)/auth-server"
fi
PGBIN=/usr/lib/postgresql/15/bin
WORK="$(mktemp -d /tmp/kindred-auth-bench.XXXXXX)"
RUN=()
if [[ "$(id -u)" == 0 ]]; then chown postgres "$WORK"; RUN=(setpriv --reuid=postgres --regid=postgres --init-groups --); fi
"${RUN[@]}" "$PGBIN/initdb" -D "$WORK/data" -U postgres -A trust --no-sync >/dev/null
PORT=$((20000 + RANDOM % 20000))
"${RUN[@]}" "$PGBIN/postgres" -D "$WORK/data" -k "$WORK" -p "$PORT" -c listen_addresses= >"$WORK/pg.log" 2>&1 &
PG=$!
SERVER=""
cleanup() {
    if [[ -n "$SERVER" ]]; then kill "$SERVER" 2>/dev/null || true; fi
    kill -INT "$PG" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
until "$PGBIN/pg_isready" -q -h "$WORK" -p "$PORT"; do sleep 0.2; done

LISTEN_PORT=$((40000 + RANDOM % 20000))
export KINDRED_AUTH_DATABASE_URL="postgresql://postgres@/postgres?host=$WORK&port=$PORT"
export KINDRED_AUTH_LISTEN="127.0.0.1:$LISTEN_PORT" KINDRED_AUTH_DATA_DIR="$WORK/key"
export KINDRED_AUTH_SMTP_PORT=9 KINDRED_AUTH_SMTP_SECURITY=none   # mail stays queued; not measured
export KINDRED_AUTH_IP_REQUESTS_PER_MINUTE=1000000
"$AUTH_SERVER" migrate --log-level error
"$AUTH_SERVER" serve --log-level error &
SERVER=$!
until "$AUTH_SERVER" healthcheck >/dev/null 2>&1; do sleep 0.2; done

python3 - "$LISTEN_PORT" <<'PY'
import sys, grpc
def field(n, t): d = t.encode(); return bytes([n << 3 | 2, len(d)]) + d
channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
signup = channel.unary_unary("/kindred.auth.v1.AuthService/SignUp", request_serializer=lambda b: b, response_deserializer=lambda b: b)
signup(field(1, "bench") + field(2, "bench@example.com") + field(3, "bench password 123") + field(4, "bench"), timeout=10)
PY
psql -q "$KINDRED_AUTH_DATABASE_URL" -c "UPDATE auth.accounts SET status = 'active', email_verified = true"
python3 services/auth/bench_signin.py "127.0.0.1:$LISTEN_PORT" bench@example.com "bench password 123" "$REQUESTS" 1 8
