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
#   OPENSANDBOX_LIFECYCLE, EXECD_LIFECYCLE_CONFIG or $HOME/.execd/lifecycle.toml: a lifecycle config. Without EXECD_INIT,
#                                execd gets --lifecycle-startup-status-file and the entrypoint starts only once execd has
#                                written `done 0` there (its preStart hook succeeded); `done N` or no report in time
#                                (10 s, then the hook's timeout and 10 s more) stops execd and exits non-zero. Under
#                                EXECD_INIT, execd itself waits for preStart before the entrypoint.
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

has_lifecycle() {
    [ -n "$(printf '%s' "${OPENSANDBOX_LIFECYCLE:-}" | tr -d '[:space:]')" ] && return 0
    [ -n "${EXECD_LIFECYCLE_CONFIG:-}" ] && return 0
    [ -n "${HOME:-}" ] && [ -e "$HOME/.execd/lifecycle.toml" ] && return 0
    return 1
}

# execd has exited (a zombie counts: this shell reaps it only in wait).
execd_gone() {
    kill -0 "$execd_pid" 2>/dev/null || return 0
    [ -r "/proc/$execd_pid/stat" ] && [ "$(sed -e 's/^.*) //' -e 's/ .*$//' "/proc/$execd_pid/stat" 2>/dev/null)" = Z ]
}

# Stops execd and exits with $1 (a preStart that failed or never reported).
fail_startup() {
    kill -TERM "$execd_pid" 2>/dev/null || true
    wait "$execd_pid" 2>/dev/null || true
    rm -rf "$status_dir"
    exit "$1"
}

# Waits for execd's `done <status>` in the status file, bounded: 10 s for the first report, then the preStart's own
# timeout (its `running <secs>` line) and 10 s of grace. Polls every 0.1 s (every second where sleep takes integers only).
wait_for_prestart() {
    step=0.1 per_second=10
    sleep "$step" 2>/dev/null || step=1 per_second=1
    ticks=0 limit=$((10 * per_second)) running_seen=0
    while :; do
        last=""
        while IFS= read -r line; do last="$line"; done <"$status_file" || {
            echo "bootstrap: the lifecycle status file $status_file is gone" >&2
            fail_startup 1
        }
        case "$last" in
        "done "*)
            prestart="${last#done }"
            case "$prestart" in
            0) return 0 ;;
            [1-9] | [1-9][0-9] | [1-9][0-9][0-9]) [ "$prestart" -le 255 ] || prestart=1 ;;
            *) prestart=1 ;;
            esac
            echo "bootstrap: lifecycle preStart failed (status $prestart)" >&2
            fail_startup "$prestart"
            ;;
        "running "*)
            if [ "$running_seen" -eq 0 ]; then
                secs="${last#running }"
                case "$secs" in
                "" | *[!0-9]* | 0* | ???????????*)
                    echo "bootstrap: execd reported a malformed preStart timeout: $last" >&2
                    fail_startup 1
                    ;;
                esac
                running_seen=1 ticks=0 limit=$(((secs + 10) * per_second))
            fi
            ;;
        "") ;;
        *)
            echo "bootstrap: execd wrote an unknown lifecycle status: $last" >&2
            fail_startup 1
            ;;
        esac
        if execd_gone; then
            status=0
            wait "$execd_pid" || status=$?
            rm -rf "$status_dir"
            echo "bootstrap: execd exited (status $status) before the lifecycle's preStart finished" >&2
            [ "$status" -ne 0 ] || status=1
            exit "$status"
        fi
        if [ "$ticks" -ge "$limit" ]; then
            echo "bootstrap: execd did not report the lifecycle's preStart in time" >&2
            fail_startup 1
        fi
        sleep "$step"
        ticks=$((ticks + 1))
    done
}

echo "bootstrap: starting execd ($EXECD)"
status_dir=""
if has_lifecycle; then
    status_dir="$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/execd-lifecycle.XXXXXX")" || {
        echo "bootstrap: cannot create the lifecycle status directory" >&2
        exit 1
    }
    status_file="$status_dir/status"
    (umask 077 && : >"$status_file")
    # shellcheck disable=SC2086
    $EXECD --lifecycle-startup-status-file "$status_file" &
    execd_pid=$!
    wait_for_prestart
    rm -rf "$status_dir"
    unset OPENSANDBOX_LIFECYCLE EXECD_LIFECYCLE_CONFIG
else
    # shellcheck disable=SC2086
    $EXECD &
    execd_pid=$!
fi
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
status=0
wait "$child" || status=$?
# A trapped signal interrupts wait: wait again for the entrypoint's own status.
while kill -0 "$child" 2>/dev/null; do
    wait "$child" || status=$?
done
# The container ends with its entrypoint, and execd with it (as upstream's bootstrap does).
kill -TERM "$execd_pid" 2>/dev/null || true
wait "$execd_pid" 2>/dev/null || true
exit "$status"
