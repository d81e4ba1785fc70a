#!/usr/bin/env bash
# Generates a compose deployment's secrets at its first start, one file per secret in a folder (compose: the
# named volume `secrets`, mounted read-only into every server at /run/kindred-secrets). A file that exists is
# kept, so secrets survive restarts and an operator may put their own values there before the first start.
# Nothing secret is in the repository: each deployment gets its own random values.
#
#   generate-secrets.sh [FOLDER]     FOLDER defaults to /run/kindred-secrets
#
# Input (environment):
#   KINDRED_SERVERS_WITH_TABLES   space-separated service names (services/cluster.env), required
#   KINDRED_DATABASE              database name, default kindred
#   KINDRED_POSTGRES_ADDRESS      host:port of PostgreSQL in the database URLs, default postgres:5432
#   KINDRED_POSTGRES_ADDRESS_<SERVICE>  host:port of the PostgreSQL server holding that service's schema, when it is
#                                 another one (several servers), default KINDRED_POSTGRES_ADDRESS
#   KINDRED_SECRETS_UID           owner of the files the servers read, default 10001 (the image's `kindred`)
#   POSTGRES_SECRETS_UID          owner of the files PostgreSQL reads, default 999 (the postgres image's user)
# Ownership is set only when running as root; every file is mode 0400.
#
# Files: service-secret-<name> (gateway, profile, discovery, match, chat, notify; auth reads all six), media-url-key,
# location-key, match-page-token-secret, notify-webhook-key, postgres-password, db-password-<service> (for
# init-roles.sh) and database-url-<service> (the same password, for the server).
set -euo pipefail

folder="${1:-/run/kindred-secrets}"
services="${KINDRED_SERVERS_WITH_TABLES:?KINDRED_SERVERS_WITH_TABLES is not set (see services/cluster.env)}"
database="${KINDRED_DATABASE:-kindred}"
postgres_address="${KINDRED_POSTGRES_ADDRESS:-postgres:5432}"
server_uid="${KINDRED_SECRETS_UID:-10001}"
postgres_uid="${POSTGRES_SECRETS_UID:-999}"
umask 077
mkdir -p "$folder"
chmod 0755 "$folder"  # each file is readable by its owner only

# 256 random bits as 43 URL-safe characters (usable inside a URL without escaping).
random_value() { head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '='; }

# write NAME OWNER VALUE: the file unless it exists (not empty); atomically, so a crash leaves no half file.
write() {
    local file="$folder/$1"
    [[ -s "$file" ]] && return 0
    printf '%s' "$3" >"$file.tmp"
    chmod 0400 "$file.tmp"
    if [[ "$(id -u)" == 0 ]]; then chown "$2" "$file.tmp"; fi
    mv -f "$file.tmp" "$file"
    echo "generate-secrets: $1 generated"
}

for name in gateway profile discovery match chat notify; do
    write "service-secret-$name" "$server_uid" "$(random_value)"
done
write media-url-key "$server_uid" "$(random_value)"
write location-key "$server_uid" "$(random_value)"
write match-page-token-secret "$server_uid" "$(random_value)"
write notify-webhook-key "$server_uid" "$(random_value)"
write postgres-password "$postgres_uid" "$(random_value)"
for service in $services; do
    write "db-password-$service" "$postgres_uid" "$(random_value)"
    # The server's URL carries the role's password (the one init-roles.sh gives the role).
    address_variable="KINDRED_POSTGRES_ADDRESS_${service^^}"
    write "database-url-$service" "$server_uid" \
        "postgresql://kindred_$service:$(cat "$folder/db-password-$service")@${!address_variable:-$postgres_address}/$database"
done
