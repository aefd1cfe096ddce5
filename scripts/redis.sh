#!/usr/bin/env bash
# Throwaway redis-server for manual testing (the test suite starts its own).
#
#   scripts/redis.sh start   start one on a free 127.0.0.1 port (in a temp dir)
#                            and print its URL; prints the running one's URL if
#                            already started
#   scripts/redis.sh url     print the URL of the running server (exit 1 if none)
#   scripts/redis.sh stop    stop it and delete its temp dir
#
# Example:  export REDIS_URL=$(scripts/redis.sh start)
#
# The server's temp dir is remembered in target/rlock-redis.dir, so there is
# one such server per checkout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"

pointer="$root/target/rlock-redis.dir"

usage() {
    echo "usage: $0 start|stop|url" >&2
    exit 2
}

# Print the state dir of the running server, or fail.
running_dir() {
    local dir
    [ -f "$pointer" ] || return 1
    dir=$(cat "$pointer")
    [ -f "$dir/redis.pid" ] && [ -f "$dir/redis.port" ] || return 1
    kill -0 "$(cat "$dir/redis.pid")" 2>/dev/null || return 1
    printf '%s\n' "$dir"
}

url_of() {
    printf 'redis://127.0.0.1:%s/\n' "$(cat "$1/redis.port")"
}

[ $# -eq 1 ] || usage
case $1 in
start)
    if dir=$(running_dir); then
        echo "redis-server already running (dir $dir)" >&2
        url_of "$dir"
        exit 0
    fi
    ensure_redis_server
    mkdir -p "$root/target"
    dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-redis.XXXXXX")
    start_redis "$dir"
    printf '%s\n' "$dir" >"$pointer"
    echo "redis-server started: pid $(cat "$dir/redis.pid"), dir $dir; stop it with: $0 stop" >&2
    url_of "$dir"
    ;;
url)
    dir=$(running_dir) || { echo "no redis-server running; start one with: $0 start" >&2; exit 1; }
    url_of "$dir"
    ;;
stop)
    if [ -f "$pointer" ]; then
        dir=$(cat "$pointer")
        stop_redis "$dir"
        case $dir in
        */rlock-redis.*) rm -rf "$dir" ;;
        esac
        rm -f "$pointer"
        echo "redis-server stopped" >&2
    else
        echo "no redis-server running" >&2
    fi
    ;;
*)
    usage
    ;;
esac
