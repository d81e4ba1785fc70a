#!/usr/bin/env bash
# Creates the Kindred database and, for every service with tables, a login role that owns the service's
# schema (kindred_auth owns schema auth, ...). Services connect and migrate as their own role, so none can
# read or change another service's tables. Idempotent: safe on every start.
#
# Shared by services/run-cluster.sh (native) and compose.yaml (mounted into /docker-entrypoint-initdb.d).
# Input (environment):
#   KINDRED_SERVERS_WITH_TABLES   space-separated service names (services/cluster.env), required
#   KINDRED_DATABASE              database name, default kindred
#   KINDRED_<SERVICE>_DB_PASSWORD the role's password (TCP with scram-sha-256); unset or empty = no password
#                                 (native: unix socket in a private folder, trust)
#   KINDRED_<SERVICE>_DB_PASSWORD_FILE  a file holding it instead (compose: services/secrets/generate-secrets.sh)
#   PGHOST, PGPORT, PGUSER        a superuser connection (PGUSER defaults to POSTGRES_USER, then postgres)
#   PSQL                          psql binary, default psql
#   KINDRED_EXTRA_SCHEMAS         further schemas a service's role owns, as service:schema pairs (run-cluster's
#                                 discovery shards: discovery:discovery_1 ...; one projection each), default none
set -euo pipefail

database="${KINDRED_DATABASE:-kindred}"
services="${KINDRED_SERVERS_WITH_TABLES:?KINDRED_SERVERS_WITH_TABLES is not set (see services/cluster.env)}"
psql="${PSQL:-psql}"
export PGUSER="${PGUSER:-${POSTGRES_USER:-postgres}}"

"$psql" -X -q -v ON_ERROR_STOP=1 -d postgres -v db="$database" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db') WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db')
\gexec
-- Only the service roles (granted below) and superusers may connect.
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
SQL

for service in $services; do
    password_variable="KINDRED_${service^^}_DB_PASSWORD"
    password="${!password_variable:-}"
    password_file_variable="${password_variable}_FILE"
    if [[ -z "$password" && -n "${!password_file_variable:-}" ]]; then password="$(<"${!password_file_variable}")"; fi
    "$psql" -X -q -v ON_ERROR_STOP=1 -d "$database" -v db="$database" -v role="kindred_$service" \
        -v schema="$service" -v password="$password" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role')
\gexec
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L', :'role', NULLIF(:'password', ''))
\gexec
-- No CREATE on the database: the role owns its schema, and the migrator creates a schema only when missing.
GRANT CONNECT, TEMPORARY ON DATABASE :"db" TO :"role";
CREATE SCHEMA IF NOT EXISTS :"schema" AUTHORIZATION :"role";
ALTER SCHEMA :"schema" OWNER TO :"role";
REVOKE ALL ON SCHEMA :"schema" FROM PUBLIC;
SQL
    echo "init-roles: database $database, role kindred_$service owns schema $service"
done

for pair in ${KINDRED_EXTRA_SCHEMAS:-}; do
    "$psql" -X -q -v ON_ERROR_STOP=1 -d "$database" -v role="kindred_${pair%%:*}" -v schema="${pair#*:}" <<'SQL'
CREATE SCHEMA IF NOT EXISTS :"schema" AUTHORIZATION :"role";
ALTER SCHEMA :"schema" OWNER TO :"role";
REVOKE ALL ON SCHEMA :"schema" FROM PUBLIC;
SQL
    echo "init-roles: role kindred_${pair%%:*} owns schema ${pair#*:} too"
done
