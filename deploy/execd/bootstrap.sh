#!/bin/sh
# deploy/execd/bootstrap.sh: starts kgate as OpenSandbox's execd in the user's image, then the image's entrypoint.
# OpenSandbox runs `/opt/opensandbox/bootstrap.sh <entrypoint...>`; this script needs /bin/sh alone.
#
# Upstream's variables (docs/API.md 6.3):
#   EXECD                        the daemon (default /opt/opensandbox/execd), word-split as upstream's: flags may follow
#   EXECD_ENVS                   a KEY=VALUE file commands see, re-read per command (default /opt/opensandbox/.env;
#                                created if missing)
#   EXECD_BOOTSTRAP_PRE_SCRIPT   a file sourced (POSIX `.`) before execd starts, so that its exports reach both
#   BOOTSTRAP_CMD, or `-c CMD`   a shell command line to run instead of the arguments (BOOTSTRAP_SHELL: its shell)
#   EXECD_INIT=true              execd becomes PID 1 itself (`execd --init -- <entrypoint>`): it reaps every orphan,
#                                forwards signals and exits with the entrypoint's status
# With no entrypoint at all, a shell is the entrypoint, as upstream.
set -e

truthy() {
    case "$(printf '%s' "${1:-}" | tr '[:upper:]' '[:lower:]')" in
    1 | true | yes | on) return 0 ;;
    *) return 1 ;;
    esac
}

EXECD="${EXECD:-/opt/opensandbox/execd}"
EXECD_ENVS="${EXECD_ENVS:-/opt/opensandbox/.env}"
mkdir -p "$(dirname "$EXECD_ENVS")" 2>/dev/null || echo "bootstrap: cannot create the directory of EXECD_ENVS=$EXECD_ENVS" >&2
touch "$EXECD_ENVS" 2>/dev/null || echo "bootstrap: cannot create EXECD_ENVS=$EXECD_ENVS" >&2
export EXECD_ENVS

if [ -n "${EXECD_BOOTSTRAP_PRE_SCRIPT:-}" ]; then
    if [ -f "$EXECD_BOOTSTRAP_PRE_SCRIPT" ] && [ -r "$EXECD_BOOTSTRAP_PRE_SCRIPT" ]; then
        case "$EXECD_BOOTSTRAP_PRE_SCRIPT" in
        */*) pre="$EXECD_BOOTSTRAP_PRE_SCRIPT" ;;
        *) pre="./$EXECD_BOOTSTRAP_PRE_SCRIPT" ;;
        esac
        # shellcheck disable=SC1090
        . "$pre"
        unset pre
    else
        echo "bootstrap: EXECD_BOOTSTRAP_PRE_SCRIPT=$EXECD_BOOTSTRAP_PRE_SCRIPT is not a readable file" >&2
    fi
fi

shell="${BOOTSTRAP_SHELL:-}"
if [ -z "$shell" ]; then
    shell="$(command -v bash 2>/dev/null || command -v sh 2>/dev/null || true)"
    [ -n "$shell" ] || {
        echo "bootstrap: neither bash nor sh on PATH" >&2
        exit 1
    }
fi

# The entrypoint becomes the positional parameters.
if [ -n "${BOOTSTRAP_CMD:-}" ]; then
    set -- "$shell" -c "$BOOTSTRAP_CMD"
elif [ $# -ge 1 ] && [ "$1" = "-c" ]; then
    shift
    set -- "$shell" -c "$*"
elif [ $# -eq 0 ]; then
    set -- "$shell"
fi

if truthy "${EXECD_INIT:-}"; then
    echo "bootstrap: execd ($EXECD) as PID 1 of the entrypoint: $*"
    # shellcheck disable=SC2086 # unquoted as upstream's: EXECD may carry execd's flags
    exec $EXECD --init -- "$@"
fi

echo "bootstrap: starting execd ($EXECD)"
# shellcheck disable=SC2086
$EXECD &
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
status=0
wait "$child" || status=$?
# A trapped signal interrupts wait: wait again for the entrypoint's own status.
while kill -0 "$child" 2>/dev/null; do
    wait "$child" || status=$?
done
exit "$status"
