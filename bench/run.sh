#!/bin/sh
# bench/run.sh: builds kgate and its benchmark (Release) and runs the benchmark; arguments go to it.
#
#   bench/run.sh                      # build into build-bench/, run all cases, print the table
#   bench/run.sh --samples 100 --json
#   KGATE_BUILD_DIR=build bench/run.sh  # use (and incrementally build) an existing build dir
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${KGATE_BUILD_DIR:-$src/build-bench}

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKGATE_TESTS=OFF >&2
fi
# Figures from a debug or sanitizer build say little about kgate: say so, but run anyway.
if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt" ||
    grep -q '^KGATE_SANITIZE:BOOL=ON$' "$build/CMakeCache.txt"; then
    echo "run.sh: warning: $build is not a plain Release build; figures will be pessimistic" >&2
fi
cmake --build "$build" -j2 --target kgate kgate_bench_execute >&2
exec "$build/bench/kgate_bench_execute" "$@"
