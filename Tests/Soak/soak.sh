#!/usr/bin/env bash
# The soak with faults (soak.py): builds the servers and kindred-load, then runs the mixed load through the
# gateway for --minutes (default 30) while a random server is killed with SIGKILL every --kill-every seconds
# (default 180) and PostgreSQL once; prints the report (requests, kills, errors outside kill windows, growth per
# hour, nothing lost) and writes samples.csv, report.json and rss.png to --out.
#   Tests/Soak/soak.sh --minutes 30 --out /tmp/soak --plot docs/soak-rss.png
#   KINDRED_SOAK_RELEASE=1 Tests/Soak/soak.sh ...     release binaries (default: the debug build)
set -euo pipefail
cd "$(dirname "$0")/../.."
configuration=debug
[ "${KINDRED_SOAK_RELEASE:-}" = 1 ] && configuration=release
for product in auth-server profile-server discovery-server match-server chat-server notify-server gateway-server \
    kindred kindred-load; do
    swift build -c "$configuration" --product "$product"
done
KINDRED_BIN_PATH="$(swift build -c "$configuration" --show-bin-path)"
export KINDRED_BIN_PATH
exec python3 Tests/Soak/soak.py "$@"
