#!/usr/bin/env bash
# What one statement costs the client, Kindred's against C's: a private PostgreSQL, then alternating rounds of
# kindred-postgres-bench (KindredPostgres's PostgresClient, as the services run their statements: libpq's blocking
# calls on the client's thread pool, the caller suspended meanwhile) and pgbench (C, libpq, one thread polling all
# its connections) running the same prepared one-row SELECT, with 1 and 8 statements in flight. Prints statements/s
# and each client's CPU time per statement (getrusage; /usr/bin/time for pgbench). The difference is what a
# statement's hand-offs between threads cost a service. docs/performance.md, "The PostgreSQL client per statement".
#
# Usage: Tests/Benchmarks/postgres-client.sh [ROUNDS (3)] [STATEMENTS per client (20000)]
# KINDRED_BIN_DIR: ready release binaries (no build).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=Tests/Benchmarks/lib/cluster.sh
source Tests/Benchmarks/lib/cluster.sh
ROUNDS="${1:-3}" STATEMENTS="${2:-20000}"
release_binaries kindred-postgres-bench
WORK="$(mktemp -d /tmp/kindred-postgres-bench.XXXXXX)"
private_postgres "$WORK"
printf '%s\n' "listen_addresses = ''" "unix_socket_directories = '$WORK/socket'" \
    | as_postgres tee -a "$WORK/data/postgresql.conf" >/dev/null
as_postgres "$PG_BIN/pg_ctl" -D "$WORK/data" -l "$WORK/postgres.log" -w start >/dev/null
printf '%s\n' '\set i random(1, 1000000)' 'SELECT :i::int8 + 1;' >"$WORK/select.sql"
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= ROUNDS; round++)); do
    echo "round $round"
    "$KINDRED_BIN_DIR/kindred-postgres-bench" "postgresql://postgres@/postgres?host=$WORK/socket" "$STATEMENTS" 1 8
    for clients in 1 8; do
        cpu="$( { /usr/bin/time -f '%U %S' "$PG_BIN/pgbench" -h "$WORK/socket" -U postgres -n -M prepared -j 1 \
            -c "$clients" -t "$STATEMENTS" -f "$WORK/select.sql" postgres >"$WORK/pgbench.out"; } 2>&1 | tail -n 1)"
        awk -v clients="$clients" -v cpu="$cpu" -v count="$((clients * STATEMENTS))" \
            '/^tps = / { split(cpu, t, " "); printf "pgbench %d in flight: %.0f statements/s, client CPU %.1f µs/statement\n",
                clients, $3, (t[1] + t[2]) * 1e6 / count }' "$WORK/pgbench.out"
    done
done
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
