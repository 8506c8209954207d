#!/usr/bin/env bash
# tests/fuzz/run_long.sh: runs every fuzz target long, one after another and niced, and reports what each did.
#
# Usage: tests/fuzz/run_long.sh [--runs N] [--max-seconds S] [--only NAME] [--build DIR] [--work DIR]
#   --runs N         executions per target (default 10000000)
#   --max-seconds S  time bound per target, whatever --runs says (default 3600)
#   --only NAME      this target only (repeatable; default all of them)
#   --build DIR      a KGATE_FUZZ build (default build-fuzz/, configured with clang and built if needed)
#   --work DIR       grown corpora, logs and crashes (default <build>/fuzz-long/); the seeds are never written
# One line per target: executions, seconds, executions per second, coverage, corpus, and the inputs that
# crashed, leaked or timed out (kept in <work>/artifacts/). Exits 1 if any target found something.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runs=10000000
max_seconds=3600
build=$root/build-fuzz
work=
only=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --runs) runs=$2 && shift ;;
    --max-seconds) max_seconds=$2 && shift ;;
    --only) only+=("$2") && shift ;;
    --build) build=$2 && shift ;;
    --work) work=$2 && shift ;;
    -h | --help)
        sed -n '4,10s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *)
        echo "run_long.sh: unknown option: $1" >&2
        exit 2
        ;;
    esac
    shift
done
work=${work:-$build/fuzz-long}

if [[ ! -f $build/CMakeCache.txt ]]; then
    nice cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
        -DKGATE_FUZZ=ON -DKGATE_WERROR=ON >&2
fi
nice cmake --build "$build" -j2 >&2
mkdir -p "$work/artifacts" "$work/logs"

found=0
printf '%-26s %12s %8s %9s %6s %16s  %s\n' target executions seconds exec/s cov corpus found
# tests/fuzz/CMakeLists.txt lists every target with its seed directory and flags (';'-separated).
while IFS=$'\t' read -r name corpus flags; do
    if [[ ${#only[@]} -gt 0 && " ${only[*]} " != *" $name "* ]]; then
        continue
    fi
    IFS=';' read -r -a args <<<"$flags"
    log=$work/logs/$name.log
    mkdir -p "$work/corpus/$name"
    before=$(find "$work/artifacts" -name "$name-*" | wc -l)
    start=$(date +%s)
    status=0
    nice "$build/tests/fuzz/$name" -runs="$runs" -max_total_time="$max_seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/$name-" "${args[@]}" "$work/corpus/$name" "$root/tests/fuzz/corpus/$corpus" \
        >"$log" 2>&1 || status=$?
    seconds=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    # the last status line: "#N DONE cov: C ft: F corp: K/SIZE ..." (or the last "pulse" before a crash)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -n 1 | cut -d' ' -f2)
    artifacts=$(($(find "$work/artifacts" -name "$name-*" | wc -l) - before))
    result=none
    if [[ $status -ne 0 || $artifacts -ne 0 ]]; then
        found=1
        result="exit $status, $artifacts input(s) in $work/artifacts (log: $log)"
    fi
    printf '%-26s %12s %8s %9s %6s %16s  %s\n' "$name" "${execs:-?}" "$seconds" "$((${execs:-0} / (seconds > 0 ? seconds : 1)))" \
        "${cov:-?}" "${corp:-?}" "$result"
done <"$build/tests/fuzz/targets.txt"
exit "$found"
