#!/usr/bin/env bash
# tests/lint/check_skips.sh: every skip of a C test goes through ts_skip_note (support/skip.h), so that deploy/test.sh
# lists it with its reason at the end of a run. A skip is for what the machine cannot do; a missing package fails.
#
# Usage: check_skips.sh SOURCE_DIR. Prints each skip that does not, and fails if there is one.
set -euo pipefail

root=${1:?usage: check_skips.sh SOURCE_DIR}
cd "$root"
if [[ ! -d tests ]]; then
    echo "no tests/ under $root: wrong SOURCE_DIR?" >&2
    exit 1
fi
# cr_skip_test( and cr_skip( calls whose statement does not name ts_skip_note( (statements span a few lines at most).
bad=$(grep -rn --include='*.c' --include='*.h' -A2 -E '\bcr_skip(_test)?\(' tests bench 2>/dev/null |
    awk '/cr_skip(_test)?\(/ { if (pending != "") print pending; pending = $0; if ($0 ~ /ts_skip_note\(/) pending = ""; next }
         pending != "" && /ts_skip_note\(/ { pending = "" }
         /^--$/ { if (pending != "") print pending; pending = "" }
         END { if (pending != "") print pending }')
if [[ -n $bad ]]; then
    echo "skips that do not say why through ts_skip_note (tests/support/include/support/skip.h):" >&2
    echo "$bad" >&2
    exit 1
fi
echo "every skip goes through ts_skip_note"
