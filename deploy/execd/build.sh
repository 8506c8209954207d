#!/usr/bin/env bash
# deploy/execd/build.sh: makes the drop-in OpenSandbox execd: OUT/execd (one self-contained file) and OUT/bootstrap.sh.
#
# Usage: deploy/execd/build.sh [OUT]   (default OUT: build-execd/out; the Release build goes to build-execd/)
# Then prints the artifact's size and its start-to-/ping time (first start, which unpacks, and a second one);
# KGATE_EXECD_MEASURE=0 leaves the timing out (the e2e test), so that the last line is `execd: <path> (<size>...)`.
#
# Debian ships no static libh2o-evloop nor libwslay (only .so), so kgate cannot be linked statically. Instead
# execd is a static launcher (deploy/execd/launcher.c) followed by kgate, kgate-bash-kernel, every shared library
# they load (from ldd) and the dynamic loader; at its first start it unpacks them beside itself and runs kgate
# through that loader, so that the image's own libraries (or its libc) are never used. Python kernels come from
# the image (its kernelspecs, as kgate discovers them).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KGATE_EXECD_BUILD:-$repo/build-execd}
out=${1:-$build/out}
cc=${CC:-cc}
mkdir -p "$build"
# One build at a time per build directory (tests of one binary may call this at once).
exec 9>"$build/.lock"
flock 9

launcher=()
if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$repo" -B "$build/kgate" -DCMAKE_BUILD_TYPE=Release -DKGATE_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build/kgate" -j2 --target kgate kgate-bash-kernel >/dev/null

stage=$build/stage
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$out"
for exe in gateway/kgate kernels/bash/kgate-bash-kernel; do
    src=$(find "$build/kgate" -type f -name "$(basename "$exe")" -perm -u+x | head -1)
    [[ -n $src ]] || { echo "build.sh: $exe not built" >&2; exit 1; }
    strip -o "$stage/bin/$(basename "$exe")" "$src"
done
# Every library either executable loads, resolved through symlinks, under its soname; the loader under the name the
# launcher runs (lib/ld-linux-x86-64.so.2).
for exe in "$stage"/bin/*; do
    ldd "$exe" | awk '/=> \// { print $1, $3 } /^\t\/.*ld-linux/ { print "ld-linux-x86-64.so.2", $1 }'
done | sort -u | while read -r soname path; do
    cp -L "$path" "$stage/lib/$soname"
done
[[ -f $stage/lib/ld-linux-x86-64.so.2 ]] || { echo "build.sh: no x86-64 dynamic loader found by ldd" >&2; exit 1; }

"$cc" -static -O2 -Wall -Wextra -Werror -Wshadow -o "$build/launcher" "$repo/deploy/execd/launcher.c" "$repo/deploy/execd/init.c"
strip "$build/launcher"

payload=$build/payload
id=$(cd "$stage" && find . -type f | sort | xargs sha256sum | sha256sum | cut -c1-16)
{
    printf 'kgate-execd %s\n' "$id"
    (cd "$stage" && find . -type f | sed 's|^\./||' | sort) | while read -r rel; do
        printf '%s %o %d\n' "$rel" "$(( 8#$(stat -c %a "$stage/$rel") ))" "$(stat -c %s "$stage/$rel")"
        cat "$stage/$rel"
    done
    printf 'end\n'
} >"$payload"
offset=$(stat -c %s "$build/launcher")
{
    cat "$build/launcher" "$payload"
    printf '%020d KGATEPAK01\n' "$offset"
} >"$out/execd.tmp"
chmod 755 "$out/execd.tmp"
mv "$out/execd.tmp" "$out/execd"
install -m 755 "$repo/deploy/execd/bootstrap.sh" "$out/bootstrap.sh"
rm -rf "$out"/.execd-*

# Figures: the file's size, and how long from exec to a 200 on /ping (each start in a fresh copy's directory, so
# the first one unpacks; the second reuses what the first unpacked).
size=$(stat -c %s "$out/execd")
printf 'execd: %s (%.1f MiB; payload %s files, id %s)\n' "$out/execd" "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" \
    "$(find "$stage" -type f | wc -l)" "$id"
if [[ ${KGATE_EXECD_MEASURE:-1} == 0 ]]; then
    exit 0
fi
trial=$(mktemp -d)
trap 'rm -rf "$trial"' EXIT
cp "$out/execd" "$trial/execd"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for start in first second; do
    t0=$(date +%s%N)
    (cd "$trial" && EXECD_ACCESS_TOKEN=build-check exec ./execd --port "$port" --pool none >"$trial/log" 2>&1) &
    pid=$!
    until curl -fsS -o /dev/null -H 'X-EXECD-ACCESS-TOKEN: build-check' "http://127.0.0.1:$port/ping" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || { echo "build.sh: execd exited; its log:" >&2; cat "$trial/log" >&2; exit 1; }
        sleep 0.01
    done
    t1=$(date +%s%N)
    kill "$pid"
    wait "$pid" || true
    echo "execd: start to /ping ($start start$([[ $start == first ]] && echo ', unpacking')): $(( (t1 - t0) / 1000000 )) ms"
done
