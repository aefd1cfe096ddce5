#!/usr/bin/env bash
# Run the rlock demo: scripts/demo.sh [DEMO ARGS...]
#
# Installs redis-server if it is missing. Without REDIS_URL / --url the CLI
# starts its own private redis-server for the demo.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_redis_server
exec cargo run --release -q -p rlock-cli -- demo "$@"
