#!/usr/bin/env bash
# tests/lint/check_shell.sh: the shell scripts of deploy/, .ci/ and tests/ pass shellcheck.
#
# Usage: check_shell.sh SOURCE_DIR. Fails when shellcheck is not installed (deploy/deps.sh installs it): a lint that
# cannot run is not a lint that passed.
set -euo pipefail

root=${1:?usage: check_shell.sh SOURCE_DIR}
if ! command -v shellcheck >/dev/null 2>&1; then
    echo "shellcheck not found: deploy/deps.sh installs it (Debian package shellcheck)" >&2
    exit 1
fi
cd "$root"

scripts=()
mapfile -d '' scripts < <(find deploy tests -type f -name '*.sh' -print0 2>/dev/null | sort -z)
if [[ -f .ci/run ]]; then
    scripts+=(.ci/run)
fi
if [[ ${#scripts[@]} -eq 0 ]]; then
    echo "no shell scripts found under $root: wrong SOURCE_DIR?" >&2
    exit 1
fi
shellcheck "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts checked, all clean"
