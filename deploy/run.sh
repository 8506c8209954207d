#!/usr/bin/env bash
# deploy/run.sh: installs what is missing, builds kgate (Release, into build/) and runs it in the foreground.
#
# Usage: deploy/run.sh [kgate options...]   e.g. deploy/run.sh --access-token s3cret
# Listens on 127.0.0.1:44772 unless a --listen option is given. Works from any directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"

bash "$root/deploy/deps.sh"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKGATE_TESTS=OFF >/dev/null
# every target: kgate finds the kernels built beside it (kernels/bash, and the deno kernelspec cmake had Deno write)
cmake --build "$build" -j"$(nproc)"

# The Python kernelspec is Debian's (/usr/share/jupyter/kernels/python3, from python3-ipykernel),
# which kgate discovers by itself; more come from --kernel-path.
listen=(--listen 127.0.0.1:44772)
for arg in "$@"; do
    case "$arg" in
    --listen | --listen=*) listen=() ;;
    esac
done

exec "$build/gateway/kgate" "${listen[@]}" "$@"
