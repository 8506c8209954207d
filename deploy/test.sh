#!/usr/bin/env bash
# deploy/test.sh: installs what is missing, builds kgate with sanitizers into build-test/ and the fuzz
# targets with clang into build-fuzz/, and runs every ctest label of both.
#
# Usage: deploy/test.sh [ctest options...]   e.g. deploy/test.sh -L unit, deploy/test.sh -L fuzz
# Exits 0 when both ctest runs pass; lists at the end every test that skipped, with its reason. Debug (-O1 -g) for readable sanitizer reports. Works from any directory; this is what .ci/run calls.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build-test"
fuzz_build="$root/build-fuzz"
jobs=$(nproc)

bash "$root/deploy/deps.sh"

# halt_on_error + abort_on_error: Criterion runs each test in a forked worker and ignores its exit
# status, so a leak report alone (LeakSanitizer exits at the end) would leave the test "passing";
# an abort makes Criterion count the test as crashed. LeakSanitizer was checked to work on these
# machines (it needs ptrace-like access some containers deny: set detect_leaks=0 there).
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:print_stacktrace=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"

# -O1 as the sanitizers' documentation advises: readable reports, and fast enough that the
# end-to-end tests of big output measure kgate rather than unoptimised code.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DKGATE_SANITIZE=ON -DKGATE_WERROR=ON -DKGATE_TESTS=ON
cmake --build "$build" -j"$jobs"
# The fuzz targets (tests/fuzz, label `fuzz`: a few seconds each) need libFuzzer, which only clang
# has: a second build holding them alone, with the same sanitizers.
cmake -S "$root" -B "$fuzz_build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DKGATE_FUZZ=ON \
    -DKGATE_WERROR=ON
cmake --build "$fuzz_build" -j"$jobs"

# Every test that skips says why (tests/support/include/support/skip.h), into this file: listed at the end. A skip is for
# what this machine cannot do (no namespaces for bubblewrap, no writable cgroups); a missing package fails its test.
export KGATE_TEST_SKIP_LOG="$build/skipped-tests.txt"
: >"$KGATE_TEST_SKIP_LOG"

status=0
(cd "$build" && ctest --output-on-failure "$@") || status=$?
# Most label filters match nothing here: that is not an error.
(cd "$fuzz_build" && ctest --output-on-failure --no-tests=ignore "$@") || status=$?

if [[ -s $KGATE_TEST_SKIP_LOG ]]; then
    echo "test.sh: skipped, for what this machine cannot do ($(wc -l <"$KGATE_TEST_SKIP_LOG") test(s)):"
    sort "$KGATE_TEST_SKIP_LOG" | sed 's/^/  /'
else
    echo "test.sh: no test skipped"
fi
exit "$status"
