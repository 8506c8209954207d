#!/usr/bin/env bash
# deploy/deps.sh: installs the Debian 12 packages kgate needs that are missing (a no-op when all are there).
#
# Usage: deploy/deps.sh [--with-r] [--with-bench] [--with-sandbox] [--with-shellcheck] [--dry-run]
# Needs root (or sudo) only when something is missing. Runs `apt-get update` at most once.
set -euo pipefail

# What building kgate needs. pkg-config modules, not CMake configs: none of the -dev packages
# ships one. libssl-dev is needed by h2o's headers but not pulled in by libh2o-evloop-dev.
# libc6-dev is only a Recommends of gcc, and we install without recommends.
build_pkgs=(cmake pkg-config gcc libc6-dev make libzmq3-dev libsodium-dev libjansson-dev libh2o-evloop-dev libssl-dev)
# What the test suite needs: Criterion, a real Python kernel for /usr/bin/python3, curl for the
# e2e tests, clang-format for the lint label.
test_pkgs=(libcriterion-dev python3-ipykernel python3-jupyter-client curl clang-format)

# Optional groups: add a flag here and its packages to `groups` below.
optional_pkgs=()
dry_run=0
usage() {
    sed -n '4,5s/^# \{0,1\}//p' "$0"
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --with-r) optional_pkgs+=(r-cran-irkernel) ;;        # the R kernel (IRkernel)
    --with-bench) optional_pkgs+=(wrk python3-jupyter-server) ;; # load generator; the server we compare with
    --with-sandbox) optional_pkgs+=(bubblewrap) ;;       # kernels without network (PLATFORM.md)
    --with-shellcheck) optional_pkgs+=(shellcheck) ;;    # lints deploy/*.sh and .ci/run
    --dry-run) dry_run=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "deps.sh: unknown option: $1" >&2
        usage >&2
        exit 2
        ;;
    esac
    shift
done

wanted=("${build_pkgs[@]}" "${test_pkgs[@]}" "${optional_pkgs[@]}")

# One dpkg-query for all packages keeps the all-present case fast (well under a second). A
# package dpkg has never heard of is absent from its output (and makes it exit 1), so check
# every wanted name against what it printed.
declare -A present=()
while read -r name status; do
    if [[ $status == ii ]]; then
        present[$name]=1
    fi
done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${wanted[@]}" 2>/dev/null || true)
missing=()
for pkg in "${wanted[@]}"; do
    if [[ -z ${present[$pkg]:-} ]]; then
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi

if [[ $dry_run -eq 1 ]]; then
    echo "deps.sh: would install: ${missing[*]}"
    exit 0
fi
echo "deps.sh: installing: ${missing[*]}" >&2

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        echo "deps.sh: missing packages and not root (no sudo): ${missing[*]}" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# stdin from /dev/null: CI has no terminal, and nothing here may wait for an answer.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
