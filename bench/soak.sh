#!/usr/bin/env bash
# bench/soak.sh: kgate under a steady load (wrk, bench/soak.lua) for a while: errors, latencies, and its RSS over time.
#
# Usage: bench/soak.sh [--duration S] [--connections N] [--get-delay MS] [--contexts N] [--build DIR] [--asan]
#                      [--kgate-arg ARG] [--keep]
#   --duration S     how long the load lasts, in seconds (default 60)
#   --connections N  connections in all (default 64): half execute, half GET (two wrk processes, one thread each)
#   --get-delay MS   each GET connection waits MS ms before each request (default 5; 0: as fast as kgate answers)
#   --contexts N     python contexts the executes go to, round robin (default 4)
#   --build DIR      the build whose gateway/kgate runs (default $KGATE_BUILD_DIR, else build-bench/: Release)
#   --asan           default to build-asan/ instead (AddressSanitizer + UBSan); either default is made if missing
#   --kgate-arg ARG  pass ARG to kgate (repeatable): --kgate-arg --run-retention-ms --kgate-arg 10000
#   --keep           keep the work dir (kgate.log, rss.tsv, wrk-*.txt) and say where it is
# Starts its own kgate on 127.0.0.1 (a free port, its own runtime dir and workspace), stops it by PID at
# the end. Exit status: 0 clean; 1 when a request failed, kgate died, or a sanitizer reported; 2 bad usage.
# Needs wrk (deploy/deps.sh --with-bench), curl and python3.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(dirname "$here")
duration=60
connections=64
get_delay=5
ncontexts=4
kgate_args=()
build=${KGATE_BUILD_DIR:-}
asan=0
keep=0
usage() {
    sed -n '4,15s/^# \{0,1\}//p' "$0"
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --duration) duration=$2 && shift ;;
    --connections) connections=$2 && shift ;;
    --get-delay) get_delay=$2 && shift ;;
    --contexts) ncontexts=$2 && shift ;;
    --build) build=$2 && shift ;;
    --asan) asan=1 ;;
    --kgate-arg) kgate_args+=("$2") && shift ;;
    --keep) keep=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "soak.sh: unknown option: $1" >&2
        usage >&2
        exit 2
        ;;
    esac
    shift
done
for tool in wrk curl python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "soak.sh: $tool not found (deploy/deps.sh --with-bench installs wrk)" >&2
        exit 2
    fi
done

if [[ -z $build ]]; then
    if [[ $asan -eq 1 ]]; then
        build=$src/build-asan
        config=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKGATE_SANITIZE=ON -DKGATE_TESTS=OFF)
    else
        build=$src/build-bench
        config=(-DCMAKE_BUILD_TYPE=Release -DKGATE_TESTS=OFF)
    fi
    if [[ ! -f $build/CMakeCache.txt ]]; then
        cmake -S "$src" -B "$build" "${config[@]}" >&2
    fi
fi
cmake --build "$build" -j2 --target kgate >&2
kgate=$build/gateway/kgate
sanitized=0
if grep -q '^KGATE_SANITIZE:BOOL=ON$' "$build/CMakeCache.txt"; then
    sanitized=1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kgate-soak.XXXXXX")
mkdir -p "$work/runtime" "$work/workspace"
pid=
sampler=
# shellcheck disable=SC2317 # reached through the EXIT trap
cleanup() {
    if [[ -n $sampler ]]; then
        kill "$sampler" 2>/dev/null || true
    fi
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    if [[ $keep -eq 1 ]]; then
        echo "soak: kept $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# Binding port 0 then closing is racy: kgate may lose the port to another process; retry then.
for _ in 1 2 3; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # The queue bound is raised so that 64 connections on a few contexts never see 429 QUEUE_FULL.
    "$kgate" --listen "127.0.0.1:$port" --runtime-dir "$work/runtime" --workspace-root "$work/workspace" --max-queue 256 \
        "${kgate_args[@]}" >"$work/kgate.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        break
    fi
    pid=
done
if [[ -z $pid ]]; then
    echo "soak.sh: kgate did not start; its log:" >&2
    tail -n 20 "$work/kgate.log" >&2
    exit 1
fi
base=http://127.0.0.1:$port

contexts=()
for _ in $(seq "$ncontexts"); do
    id=$(curl -fsS -X POST "$base/code/context" -H 'Content-Type: application/json' -d '{"language": "python"}' |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
    curl -fsS -o /dev/null -X POST "$base/code" -H 'Content-Type: application/json' \
        -d "{\"context\": {\"id\": \"$id\"}, \"code\": \"1\"}"
    contexts+=("$id")
done

# kgate's resident memory once a second (kernels are separate processes and not counted).
rss_kib() {
    sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$pid/status" 2>/dev/null || true
}
(
    t=0
    while kill -0 "$pid" 2>/dev/null; do
        printf '%s\t%s\n' "$t" "$(rss_kib)"
        sleep 1
        t=$((t + 1))
    done
) >"$work/rss.tsv" &
sampler=$!

echo "soak: kgate $("$kgate" --version 2>/dev/null | head -n 1 || echo "?") from $build$([[ $sanitized -eq 1 ]] && echo " (ASan+UBSan)"), pid $pid, port $port;" \
    "${duration}s, $connections connections (GETs every ${get_delay} ms), $ncontexts contexts${kgate_args[*]:+, kgate ${kgate_args[*]}}"
status=0
wrk_pids=()
for mode in execute get; do
    n=$((connections / 2)) pause=0
    if [[ $mode == get ]]; then
        n=$((connections - n)) pause=$get_delay
    fi
    wrk -t1 -c"$n" -d"${duration}s" --timeout 30s -s "$here/soak.lua" "$base" -- "$mode" "$pause" "${contexts[@]}" \
        >"$work/wrk-$mode.txt" 2>&1 &
    wrk_pids+=($!)
done
for p in "${wrk_pids[@]}"; do
    wait "$p" || status=1
done
for mode in execute get; do
    grep '^soak ' "$work/wrk-$mode.txt" | grep -v ' failures ' || cat "$work/wrk-$mode.txt"
    failures=$(sed -n 's/^soak [a-z]*: failures //p' "$work/wrk-$mode.txt")
    if [[ -z $failures || $failures -ne 0 ]]; then
        status=1
    fi
done

sleep 1
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=
# RSS: the samples during the load, every tenth of them, and the growth from the first to the last.
awk -v d="$duration" '$2 != "" && $1 <= d + 1 { t[n] = $1; r[n++] = $2; if (max == "" || $2 > max) max = $2 }
    END {
        if (n == 0) { print "soak: no RSS samples"; exit }
        step = int(n / 10); if (step < 1) step = 1
        line = "soak: kgate RSS MiB over time (s):"
        for (i = 0; i < n; i += step) line = line sprintf(" %d:%.1f", t[i], r[i] / 1024)
        if ((n - 1) % step) line = line sprintf(" %d:%.1f", t[n - 1], r[n - 1] / 1024)
        print line
        printf "soak: kgate RSS first %.1f MiB, max %.1f MiB, last %.1f MiB (%+.1f MiB)\n", r[0] / 1024, max / 1024, r[n - 1] / 1024, (r[n - 1] - r[0]) / 1024
    }' "$work/rss.tsv"

if ! kill -0 "$pid" 2>/dev/null; then
    echo "soak: kgate died during the run; its log ends with:"
    tail -n 20 "$work/kgate.log"
    status=1
    pid=
else
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "soak: kgate ignored SIGTERM for 10 s: killed"
        kill -KILL "$pid"
        status=1
    fi
    wait "$pid" 2>/dev/null || true
    pid=
fi
# Leaks are reported when kgate exits, so this comes after the stop.
if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$work/kgate.log"; then
    echo "soak: sanitizer report in kgate's log:"
    grep -E -A 12 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$work/kgate.log" | head -n 40
    status=1
elif [[ $sanitized -eq 1 ]]; then
    echo "soak: no sanitizer report (leaks checked at exit)"
fi
exit "$status"
