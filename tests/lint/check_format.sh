#!/usr/bin/env bash
# tests/lint/check_format.sh: every C file of the tree is formatted as the repo's .clang-format says.
#
# Usage: check_format.sh SOURCE_DIR. Fails when clang-format is not installed (deploy/deps.sh installs it).
set -euo pipefail

root=${1:?usage: check_format.sh SOURCE_DIR}
clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
    echo "$clang_format not found: deploy/deps.sh installs it (Debian package clang-format)" >&2
    exit 1
fi
cd "$root"

dirs=()
for d in wire sys kernelmgr gateway kernels deploy tests bench; do
    if [[ -d $d ]]; then
        dirs+=("$d")
    fi
done
files=()
if [[ ${#dirs[@]} -gt 0 ]]; then
    mapfile -d '' files < <(find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
fi
if [[ ${#files[@]} -eq 0 ]]; then
    echo "no C files found under $root: wrong SOURCE_DIR?" >&2
    exit 1
fi

# One clang-format process for the whole tree (one per file took minutes on a loaded machine): it names
# every file it would change in diagnostics of the form FILE:LINE:COL: error: ...
out=$("$clang_format" --style=file --dry-run -Werror "${files[@]}" 2>&1) || true
mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$out" | cut -d: -f1 | sort -u)
if [[ ${#bad[@]} -gt 0 ]]; then
    # The first diagnostics are enough to see what is wrong; the fix is mechanical.
    head -n 24 <<<"$out" >&2
elif [[ -n $out ]]; then
    echo "$out" >&2
    echo "clang-format failed without naming a file" >&2
    exit 1
fi

echo "clang-format ($("$clang_format" --version | grep -o '[0-9][0-9.]*' | head -n 1)): ${#files[@]} files checked, ${#bad[@]} not formatted"
if [[ ${#bad[@]} -gt 0 ]]; then
    printf '  %s\n' "${bad[@]}"
    echo "fix with: clang-format -i ${bad[*]}"
    exit 1
fi
