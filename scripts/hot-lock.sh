#!/usr/bin/env bash
# The hot-lock acceptance figure of issue 29: how close one hot lock comes to
# its critical section alone, measured with the CLI as the issue defines it.
#
#   scripts/hot-lock.sh [--url URL] [--processes LIST] [--rounds N]
#                       [--iterations N] [--tasks N] [--requests N]
#                       [--rlock-args "FLAGS"] [--out FILE] [--quick]
#
#   --url URL          the Redis to measure on; without it a private
#                      redis-server is started on a free loopback port and
#                      stopped at the end
#   --processes LIST   process counts P, comma-separated (default 1,2,4,8;
#                      the headline is P = 2)
#   --rounds N         rounds per P (default 3)
#   --iterations N     acquisitions per task at P = 2 (default 300); with P
#                      processes each task makes N * 2 / P (at least 1), so
#                      every P makes the same number of acquisitions, as in
#                      scripts/bench.sh's scenario 8
#   --tasks N          tasks per process (default 4)
#   --requests N       redis-benchmark's -n (default 20000)
#   --rlock-args FLAGS extra global flags for every `rlock` process, split on
#                      spaces, e.g. --rlock-args --no-local-handoff (every
#                      task races in Redis on its own: the figure without
#                      local hand-off) or --rlock-args "--watchdog-ms 10000"
#   --out FILE         where to write one JSON line per round (default
#                      target/bench/hot-lock.jsonl)
#   --quick            a smoke run: P = 1,2, one round, 25 iterations, 2000
#                      requests (options after it override these)
#
# Builds the CLI (rlock-cli, release), then for each P runs its rounds; each
# round, on one server:
#   1. the ceiling: `redis-benchmark -p PORT -c 1 -n 20000 -t get,set --csv`
#      (`-u URL` with --url); ceiling = 1 / (1/GET_rps + 1/SET_rps), the GET +
#      SET of the critical section back to back by one client with no lock;
#   2. P concurrent `rlock --url URL check NAME --tasks 4 --iterations N`
#      processes on a fresh NAME, each printing one JSON line
#      {"acquisitions":..,"counter":..,"elapsed_ms":..,...}; `INFO
#      commandstats` is read before they start and after they all exit.
# Per round: throughput = all acquisitions / the slower process's elapsed_ms;
# scripts per acquisition = (EVAL + EVALSHA calls) delta / all acquisitions;
# mutual exclusion = every process made tasks * N acquisitions and the counter
# the last one read equals all of them (each process reads NAME:counter when
# its own tasks are done, so only the last finisher sees every increment; a
# lost increment shows there). A round that breaks it is reported at once
# ("!!! MUTUAL EXCLUSION BROKEN") and makes the script exit 1 at the end.
#
# Prints progress on stderr and, on stdout, a markdown table per P: median
# (min–max) throughput, ceiling, throughput ÷ ceiling (of the medians) and
# scripts per acquisition, then the issue's acceptance check for P = 2
# (≥ 0.8 of the ceiling at ≤ 0.25 scripts per acquisition).
#
# Not part of scripts/test.sh: timings need a quiet machine. Leaves the key
# redis-benchmark writes (key:__rand_int__) on the server; deletes the
# counters (not with a --name-prefix in --rlock-args: the counter is then
# PREFIX + NAME:counter).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
}

url=""
processes="1,2,4,8"
headline=2
rounds=3
iterations=300
tasks=4
requests=20000
rlock_args=""
out="target/bench/hot-lock.jsonl"
while [ $# -gt 0 ]; do
    case "$1" in
    --url) url=${2:?--url needs a URL}; shift 2 ;;
    --processes) processes=${2:?--processes needs a list}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --iterations) iterations=${2:?--iterations needs a number}; shift 2 ;;
    --tasks) tasks=${2:?--tasks needs a number}; shift 2 ;;
    --requests) requests=${2:?--requests needs a number}; shift 2 ;;
    --rlock-args) rlock_args=${2?--rlock-args needs flags}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --quick) processes="1,2"; rounds=1; iterations=25; requests=2000; shift ;;
    -h | --help) usage ;;
    *) echo "unknown option: $1" >&2; usage ;;
    esac
done
for number in "$rounds" "$iterations" "$tasks" "$requests"; do
    [[ $number =~ ^[1-9][0-9]*$ ]] || die "not a positive number: $number"
done
IFS=, read -ra process_counts <<<"$processes"
for p in "${process_counts[@]}"; do
    [[ $p =~ ^[1-9][0-9]*$ ]] || die "not a process count: $p"
done
read -ra extra_flags <<<"$rlock_args"

ensure_redis_server
if ! command -v redis-benchmark >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis-benchmark or redis-cli not found: installing redis-tools with apt-get" >&2
    apt_install redis-tools
fi
section "building rlock (rlock-cli, release)"
cargo build --release -q -p rlock-cli
rlock=target/release/rlock

work=$(mktemp -d)
cleanup() {
    stop_redis "$work/redis"
    rm -rf "$work"
}
trap cleanup EXIT
if [ -n "$url" ]; then
    server=(-u "$url")
else
    start_redis "$work/redis"
    port=$(cat "$work/redis/redis.port")
    url="redis://127.0.0.1:$port/"
    server=(-p "$port")
fi
section "Redis at $url"

# redis-cli on the measured server.
rcli() {
    redis-cli "${server[@]}" "$@"
}

# EVAL + EVALSHA calls so far (INFO commandstats).
script_calls() {
    rcli INFO commandstats | tr -d '\r' |
        awk -F'[:,=]' '$1 == "cmdstat_eval" || $1 == "cmdstat_evalsha" { n += $3 } END { print n + 0 }'
}

# The ceiling in sections/s: redis-benchmark's GET and SET rates combined as
# one GET then one SET, back to back.
ceiling() {
    redis-benchmark "${server[@]}" -c 1 -n "$requests" -t get,set --csv |
        tr -d '"\r' |
        awk -F, '$1 == "GET" { get = $2 } $1 == "SET" { set = $2 }
            END {
                if (get <= 0 || set <= 0) exit 1
                printf "%.1f %.1f %.1f\n", 1 / (1 / get + 1 / set), get, set
            }' ||
        die "redis-benchmark gave no GET and SET rates"
}

# The value of the numeric FIELD in the flat JSON object LINE.
json_number() {
    sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" <<<"$1"
}

# "median min max" of the numbers on stdin.
spread() {
    sort -g | awk '{ v[NR] = $1 }
        END {
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            print m, v[1], v[NR]
        }'
}

# "MEDIAN (MIN–MAX)" with DIGITS decimals, from "median min max"; the median
# alone for one round.
show() {
    awk -v f="%.$2f" -v r="$rounds" '{
        if (r > 1) printf f " (" f "–" f ")", $1, $2, $3
        else printf f, $1
    }' <<<"$1"
}

mkdir -p "$(dirname "$out")"
: >"$out"
broken=0
run_id=$(date +%s)-$$
declare -A row_throughput row_ceiling row_ratio row_scripts row_shape row_exclusive ratio_of scripts_of

for p in "${process_counts[@]}"; do
    per_task=$((iterations * headline / p))
    [ "$per_task" -ge 1 ] || per_task=1
    total=$((p * tasks * per_task))
    section "P = $p: $p × $tasks × $per_task (processes × tasks × iterations), $rounds round(s)"
    throughputs=() ceilings=() scripts=() exclusive=yes
    for round in $(seq 1 "$rounds"); do
        read -r ceil get_rps set_rps < <(ceiling)
        name="hot-lock:$run_id:p$p:r$round"
        before=$(script_calls)
        pids=()
        for i in $(seq 1 "$p"); do
            "$rlock" --url "$url" "${extra_flags[@]}" check "$name" \
                --tasks "$tasks" --iterations "$per_task" \
                >"$work/p$i.json" 2>"$work/p$i.err" &
            pids+=($!)
        done
        failed=0
        for i in $(seq 1 "$p"); do
            if ! wait "${pids[$((i - 1))]}"; then
                echo "rlock process $i of $p failed:" >&2
                cat "$work/p$i.err" >&2
                failed=1
            fi
        done
        [ "$failed" -eq 0 ] || die "an rlock check process failed (P = $p, round $round)"
        after=$(script_calls)
        rcli DEL "$name:counter" >/dev/null

        slowest=0 last_counter=0 acquisitions=0 lines=""
        for i in $(seq 1 "$p"); do
            line=$(head -n 1 "$work/p$i.json")
            lines+="${lines:+,}$line"
            acq=$(json_number "$line" acquisitions)
            counter=$(json_number "$line" counter)
            elapsed=$(json_number "$line" elapsed_ms)
            [ -n "$acq" ] && [ -n "$counter" ] && [ -n "$elapsed" ] ||
                die "process $i printed no check report: $line"
            acquisitions=$((acquisitions + acq))
            if [ "$acq" -ne $((tasks * per_task)) ]; then
                echo "!!! process $i made $acq acquisitions, not $((tasks * per_task))" >&2
                exclusive=no
                broken=1
            fi
            [ "$elapsed" -le "$slowest" ] || slowest=$elapsed
            [ "$counter" -le "$last_counter" ] || last_counter=$counter
        done
        if [ "$last_counter" -ne "$total" ] || [ "$acquisitions" -ne "$total" ]; then
            echo "!!! MUTUAL EXCLUSION BROKEN (P = $p, round $round, $name): counter" \
                "$last_counter after $acquisitions acquisitions (expected $total)" >&2
            exclusive=no
            broken=1
        fi
        read -r throughput per_acquisition < <(awk -v a="$acquisitions" -v ms="$slowest" \
            -v s=$((after - before)) \
            'BEGIN { printf "%.1f %.4f\n", (ms > 0 ? a * 1000 / ms : 0), s / a }')
        throughputs+=("$throughput") ceilings+=("$ceil") scripts+=("$per_acquisition")
        printf '    round %s: %s acquisitions/s (slower process %s ms), ceiling %s sections/s (GET %s/s, SET %s/s), %s scripts/acquisition, counter %s of %s\n' \
            "$round" "$throughput" "$slowest" "$ceil" "$get_rps" "$set_rps" \
            "$per_acquisition" "$last_counter" "$total" >&2
        printf '{"processes":%s,"round":%s,"name":"%s","tasks":%s,"iterations":%s,"acquisitions":%s,"slowest_elapsed_ms":%s,"throughput":%s,"ceiling":%s,"get_rps":%s,"set_rps":%s,"scripts":%s,"scripts_per_acquisition":%s,"counter":%s,"exclusive":%s,"reports":[%s]}\n' \
            "$p" "$round" "$name" "$tasks" "$per_task" "$acquisitions" "$slowest" \
            "$throughput" "$ceil" "$get_rps" "$set_rps" $((after - before)) \
            "$per_acquisition" "$last_counter" \
            "$([ "$exclusive" = yes ] && echo true || echo false)" "$lines" >>"$out"
    done
    t=$(printf '%s\n' "${throughputs[@]}" | spread)
    c=$(printf '%s\n' "${ceilings[@]}" | spread)
    s=$(printf '%s\n' "${scripts[@]}" | spread)
    row_shape[$p]="$p × $tasks × $per_task"
    if [ "$p" -eq "$headline" ]; then
        row_shape[$p]+=" (headline)"
    fi
    row_throughput[$p]=$(show "$t" 0)
    row_ceiling[$p]=$(show "$c" 0)
    ratio_of[$p]=$(awk -v t="${t%% *}" -v c="${c%% *}" 'BEGIN { printf "%.2f", t / c }')
    scripts_of[$p]=${s%% *}
    row_scripts[$p]=$(show "$s" 2)
    row_exclusive[$p]="yes"
    if [ "$exclusive" != yes ]; then
        row_exclusive[$p]="**NO, BROKEN**"
    fi
done

printf '\nHot lock (issue 29): `rlock check NAME --tasks %s` in P processes%s, `GET` + `SET` of a counter under the lock; ceiling: `redis-benchmark -c 1 -n %s -t get,set`, 1 / (1/GET + 1/SET), before every round; median (min–max) of %s round(s).\n\n' \
    "$tasks" "${rlock_args:+ with \`$rlock_args\`}" "$requests" "$rounds"
echo "| P | processes × tasks × iterations | acquisitions/s | ceiling (sections/s) | acquisitions/s ÷ ceiling | scripts per acquisition | mutual exclusion |"
echo "|---|---|---|---|---|---|---|"
for p in "${process_counts[@]}"; do
    echo "| $p | ${row_shape[$p]} | ${row_throughput[$p]} | ${row_ceiling[$p]} | ${ratio_of[$p]} | ${row_scripts[$p]} | ${row_exclusive[$p]} |"
done
if [ -n "${ratio_of[$headline]:-}" ]; then
    verdict=$(awk -v r="${ratio_of[$headline]}" -v s="${scripts_of[$headline]}" \
        'BEGIN { print (r >= 0.8 && s <= 0.25) ? "met" : "**not met**" }')
    [ "${row_exclusive[$headline]}" = yes ] || verdict="**not met** (mutual exclusion broken)"
    printf '\nAcceptance (P = %s): ≥ 0.8 of the ceiling at ≤ 0.25 scripts per acquisition: %s ÷ ceiling, %s scripts per acquisition (medians): %s\n' \
        "$headline" "${ratio_of[$headline]}" "$(awk -v s="${scripts_of[$headline]}" 'BEGIN { printf "%.2f", s }')" "$verdict"
fi
section "every round as JSON: $out"
[ "$broken" -eq 0 ] || die "mutual exclusion broken: see the rounds above"
