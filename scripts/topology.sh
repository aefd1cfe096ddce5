#!/usr/bin/env bash
# Local Redis topologies on loopback, for trying rlock on them by hand (the test suite starts its own).
#
#   scripts/topology.sh start cluster    3 masters with a replica each
#   scripts/topology.sh start sentinel   a master, 2 replicas and 3 sentinels (master name rlockmaster)
#   scripts/topology.sh stop cluster|sentinel
#   scripts/topology.sh status
#
# `start` builds and runs tests/src/bin/rlock-topology.rs in the background, and prints on stdout its
# JSON description, then the rlock CLI flags that reach the topology, e.g.
#
#   {"kind":"cluster","seeds":["redis://127.0.0.1:P1/",...]}
#   --cluster --url redis://127.0.0.1:P1/ --url ...
#
# so that `rlock $(scripts/topology.sh start cluster | tail -n 1) check NAME --tasks 4 --iterations 100`
# works. Its servers live in temp dirs that `stop` removes. State: target/rlock-topology-KIND.{pid,json,log},
# or in $RLOCK_TOPOLOGY_DIR when set (the tests use their own).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"

kinds=(cluster sentinel)
# How long a topology may take to come up, and to go down after SIGTERM.
start_timeout_s=120
stop_timeout_s=20

usage() {
    echo "usage: $0 start cluster|sentinel | stop cluster|sentinel | status" >&2
    exit 2
}

state_dir=${RLOCK_TOPOLOGY_DIR:-$root/target}

state() {
    printf '%s/rlock-topology-%s.%s\n' "$state_dir" "$1" "$2"
}

# Succeed if process PID runs rlock-topology (a zombie or a recycled pid does not count).
is_topology() {
    local pid=$1 stat
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    # Fields after "PID (COMM) ": the first is the state.
    stat=${stat##*) }
    [ "${stat%% *}" != Z ] || return 1
    grep -qx rlock-topology "/proc/$pid/comm" 2>/dev/null
}

# Print the pid of the running KIND topology, or fail.
running_pid() {
    local pid
    pid=$(cat "$(state "$1" pid)" 2>/dev/null) || return 1
    is_topology "$pid" || return 1
    printf '%s\n' "$pid"
}

# The URLs in the JSON array FIELD of the one-line JSON object on stdin.
urls_of() {
    sed -n "s/.*\"$1\":\[\([^]]*\)\].*/\1/p" | grep -o 'redis://[^"]*'
}

# The rlock CLI flags that reach the KIND topology described by the JSON on stdin.
flags_of() {
    local kind=$1 json flags field url
    json=$(cat)
    case $kind in
    cluster)
        flags="--cluster"
        field=seeds
        ;;
    sentinel)
        flags="--sentinel-master $(sed -n 's/.*"master_name":"\([^"]*\)".*/\1/p' <<<"$json")"
        field=sentinels
        ;;
    esac
    for url in $(urls_of "$field" <<<"$json"); do
        flags+=" --url $url"
    done
    printf '%s\n' "$flags"
}

describe() {
    local kind=$1 json
    json=$(cat "$(state "$kind" json)")
    printf '%s\n' "$json"
    flags_of "$kind" <<<"$json"
}

# Builds rlock-topology. What Cargo sets for the crate it runs (as when a test runs this script) is
# unset: build scripts that read it would see it change and rebuild half the dependency tree.
build() {
    local unset=() var
    for var in $(compgen -e); do
        case $var in
        CARGO_PKG_* | CARGO_MANIFEST_* | CARGO_BIN_* | CARGO_CRATE_NAME | CARGO_PRIMARY_PACKAGE | \
            CARGO_TARGET_TMPDIR | CARGO_RUSTC_CURRENT_DIR | OUT_DIR)
            unset+=(-u "$var")
            ;;
        esac
    done
    section "building rlock-topology"
    (cd "$root" && env "${unset[@]}" "${CARGO:-cargo}" build -q -p rlock-tests --bin rlock-topology) >&2
}

start() {
    local kind=$1 bin pid out log
    if pid=$(running_pid "$kind"); then
        echo "$kind already running (pid $pid)" >&2
        describe "$kind"
        return 0
    fi
    ensure_redis_server
    build
    bin=${CARGO_TARGET_DIR:-$root/target}
    [[ $bin == /* ]] || bin=$root/$bin # Cargo reads a relative one from the root
    bin=$bin/debug/rlock-topology
    mkdir -p "$state_dir"
    out=$(state "$kind" json)
    log=$(state "$kind" log)
    rm -f "$out"
    section "starting a $kind on loopback"
    # Until SIGTERM, not until standard input closes: a background job's is /dev/null.
    "$bin" "$kind" --until-signal </dev/null >"$out.tmp" 2>"$log" &
    pid=$!
    printf '%s\n' "$pid" >"$(state "$kind" pid)"
    for _ in $(seq 1 $((start_timeout_s * 10))); do
        if [ "$(wc -l <"$out.tmp")" -ge 1 ]; then
            mv "$out.tmp" "$out"
            echo "$kind started: pid $pid, log $log; stop it with: $0 stop $kind" >&2
            describe "$kind"
            return 0
        fi
        is_topology "$pid" || break
        sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null || true
    rm -f "$out.tmp" "$(state "$kind" pid)"
    tail -n 20 "$log" >&2 || true
    die "the $kind did not come up; log: $log"
}

stop() {
    local kind=$1 pid
    if ! pid=$(running_pid "$kind"); then
        echo "no $kind running" >&2
        rm -f "$(state "$kind" pid)" "$(state "$kind" json)"
        return 0
    fi
    kill -TERM "$pid"
    for _ in $(seq 1 $((stop_timeout_s * 10))); do
        is_topology "$pid" || break
        sleep 0.1
    done
    rm -f "$(state "$kind" pid)" "$(state "$kind" json)"
    if is_topology "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        die "$kind (pid $pid) ignored SIGTERM and was killed: its redis-servers may be left running"
    fi
    echo "$kind stopped" >&2
}

status() {
    local kind pid
    for kind in "${kinds[@]}"; do
        if pid=$(running_pid "$kind"); then
            echo "$kind: running (pid $pid)"
            describe "$kind"
        else
            echo "$kind: stopped"
        fi
    done
}

case ${1:-} in
start | stop)
    [ $# -eq 2 ] || usage
    case $2 in
    cluster | sentinel) "$1" "$2" ;;
    *) usage ;;
    esac
    ;;
status)
    [ $# -eq 1 ] || usage
    status
    ;;
*)
    usage
    ;;
esac
