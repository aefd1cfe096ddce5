# shellcheck shell=bash
# Shared helpers for the scripts in this directory. Source it, don't run it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Functions:
#   section TITLE         print a visible section header (stderr)
#   apt_install PKG...    install Debian packages, starting none of their services
#   ensure_redis_server   install redis-server with apt-get if it is missing
#   ensure_tmux           install tmux with apt-get if it is missing
#   redis_server_bin      the redis-server binary to use ($RLOCK_REDIS_SERVER
#                         or redis-server)
#   free_port             print a loopback port nothing listens on
#   redis_ping PORT       succeed if 127.0.0.1:PORT answers PING with PONG
#   start_redis DIR       start a throwaway redis-server on a free loopback
#                         port, data and log in DIR; writes DIR/redis.pid and
#                         DIR/redis.port and waits until it answers PING
#   stop_redis DIR        stop the server started by start_redis DIR
#   use_throwaway_redis_url
#                         unless REDIS_URL is set, start a throwaway server
#                         (start_redis), export REDIS_URL for it and stop it
#                         when the script exits (sets the EXIT trap)
#
# Messages go to stderr so stdout stays usable for results (ports, URLs).

# Print a section header.
section() {
    printf '\n==> %s\n' "$*" >&2
}

# Print an error and return 1.
die() {
    printf 'error: %s\n' "$*" >&2
    return 1
}

# The redis-server binary to run: $RLOCK_REDIS_SERVER if set, else redis-server.
redis_server_bin() {
    printf '%s\n' "${RLOCK_REDIS_SERVER:-redis-server}"
}

# Run a command as root (directly, or through sudo when we are not root).
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root to run: $*"
    fi
}

# Install Debian packages with apt-get, starting none of the services they
# ship: a policy-rc.d forbids starting services during the install.
apt_install() {
    command -v apt-get >/dev/null 2>&1 ||
        { die "apt-get is not available: install $* yourself"; return 1; }
    local policy=/usr/sbin/policy-rc.d created_policy=0 status=0
    if [ ! -e "$policy" ]; then
        # Exit code 101 = "action forbidden": invoke-rc.d / deb-systemd-invoke
        # will not start the service the package ships.
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null &&
            as_root chmod 755 "$policy" && created_policy=1
    fi
    as_root apt-get update -q &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" ||
        status=$?
    if [ "$created_policy" -eq 1 ]; then
        as_root rm -f "$policy"
    fi
    [ "$status" -eq 0 ] || die "apt-get install $* failed ($status)"
}

# Make sure a redis-server binary is available, installing Debian's package
# if needed. The package's service must not keep a server running on 6379:
# apt_install starts none, and any server started anyway is stopped afterwards.
ensure_redis_server() {
    local bin
    bin=$(redis_server_bin)
    if command -v "$bin" >/dev/null 2>&1; then
        return 0
    fi
    if [ -n "${RLOCK_REDIS_SERVER:-}" ]; then
        die "RLOCK_REDIS_SERVER=$RLOCK_REDIS_SERVER is not an executable"
        return 1
    fi
    echo "redis-server not found: installing it with apt-get (>= 6.2 needed)" >&2
    local status=0
    apt_install redis-server || status=$?
    # Belt and braces: never leave the package's own server on 6379 behind.
    as_root service redis-server stop >/dev/null 2>&1 || true
    if command -v systemctl >/dev/null 2>&1; then
        as_root systemctl disable --now redis-server >/dev/null 2>&1 || true
    fi
    [ "$status" -eq 0 ] || return 1
    command -v "$bin" >/dev/null 2>&1 || { die "redis-server still not on PATH after install"; return 1; }
}

# Make sure tmux is available (the `rlock watch` terminal test runs it),
# installing Debian's package if needed.
ensure_tmux() {
    if command -v tmux >/dev/null 2>&1; then
        return 0
    fi
    echo "tmux not found: installing it with apt-get" >&2
    apt_install tmux || return 1
    command -v tmux >/dev/null 2>&1 || { die "tmux still not on PATH after install"; return 1; }
}

# Succeed if something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Print a loopback port that nothing listens on right now. Ports come from
# 20000-32767, below Linux's ephemeral range, so outgoing connections don't
# collide with them. Another process may still take the port before we bind
# it: start_redis retries with a new port when that happens.
free_port() {
    local port attempt
    for attempt in $(seq 1 100); do
        port=$((20000 + RANDOM % 12768))
        if ! port_in_use "$port"; then
            printf '%s\n' "$port"
            return 0
        fi
    done
    die "no free loopback port found"
}

# Succeed if 127.0.0.1:PORT answers PING with PONG within a second.
# Uses bash's /dev/tcp, so it needs no redis-cli.
redis_ping() {
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'PING\r\n' >&3 || exit 1
        IFS= read -r -t 1 reply <&3 || exit 1
        [ "${reply%$'\r'}" = "+PONG" ]
    ) 2>/dev/null
}

# Start a throwaway redis-server on a free loopback port with its data and log
# in DIR (created if needed). Writes DIR/redis.pid and DIR/redis.port, waits
# (10 s at most) until it answers PING. Retries with another port if the
# server exits during startup (e.g. the port was taken meanwhile).
start_redis() {
    local dir=${1:?usage: start_redis DIR} bin port pid attempt i
    bin=$(redis_server_bin)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    for attempt in 1 2 3 4 5; do
        port=$(free_port) || return 1
        "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$dir" --daemonize no --protected-mode no \
            </dev/null >>"$dir/redis.log" 2>&1 &
        pid=$!
        printf '%s\n' "$pid" >"$dir/redis.pid"
        printf '%s\n' "$port" >"$dir/redis.port"
        for i in $(seq 1 200); do
            if ! kill -0 "$pid" 2>/dev/null; then
                break # exited: retry with another port
            fi
            if redis_ping "$port" && kill -0 "$pid" 2>/dev/null; then
                return 0
            fi
            sleep 0.05
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            rm -f "$dir/redis.pid" "$dir/redis.port"
            die "redis-server on port $port did not answer PING within 10 s; log: $dir/redis.log"
            return 1
        fi
        echo "redis-server exited during startup on port $port (attempt $attempt), retrying" >&2
    done
    rm -f "$dir/redis.pid" "$dir/redis.port"
    tail -n 20 "$dir/redis.log" >&2 || true
    die "redis-server failed to start; log: $dir/redis.log"
}

# Stop the server started by start_redis DIR: SIGTERM, then SIGKILL after 5 s.
# Succeeds if no server is running.
stop_redis() {
    local dir=${1:?usage: stop_redis DIR} pid i
    [ -f "$dir/redis.pid" ] || return 0
    pid=$(cat "$dir/redis.pid")
    rm -f "$dir/redis.pid" "$dir/redis.port"
    # Guard against a recycled pid: only signal a redis (or Valkey, when
    # $RLOCK_REDIS_SERVER names one: scripts/server-matrix.sh) process.
    if [ -r "/proc/$pid/comm" ] && ! grep -qiE 'redis|valkey' "/proc/$pid/comm"; then
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# Give the rustdoc examples (README included) and the examples, which talk to
# the server in REDIS_URL, a throwaway one unless the caller chose one. The
# server is stopped when the (sub)shell exits: this sets the EXIT trap.
use_throwaway_redis_url() {
    [ -z "${REDIS_URL:-}" ] || return 0
    throwaway_redis=$(mktemp -d)
    trap 'stop_redis "$throwaway_redis"; rm -rf "$throwaway_redis"' EXIT
    start_redis "$throwaway_redis" || return 1
    export REDIS_URL="redis://127.0.0.1:$(cat "$throwaway_redis/redis.port")/"
}
