#!/usr/bin/env bash
# deploy/install.sh: builds kgate (Release), installs it to /usr/local/bin and its systemd unit; safe to re-run.
#
# Usage: deploy/install.sh [--enable]   (--enable also enables and (re)starts the service)
# DESTDIR=/some/root installs into a staging tree instead (no systemctl calls then).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
destdir=${DESTDIR:-}
enable=0
case "${1:-}" in
--enable) enable=1 ;;
"") ;;
*)
    echo "usage: deploy/install.sh [--enable]" >&2
    exit 2
    ;;
esac

bash "$root/deploy/deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKGATE_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"

# kgate, kgate-bash-kernel and the kernelspecs kgate ships (found beside the binary at run time)
DESTDIR="$destdir" cmake --install "$build" --prefix /usr/local >/dev/null
install -D -m 0644 "$root/deploy/kgate.service" "$destdir/etc/systemd/system/kgate.service"

# The environment file holds the token: created once, never overwritten.
env_file="$destdir/etc/kgate/kgate.env"
if [[ ! -e $env_file ]]; then
    install -d -m 0755 "$(dirname "$env_file")"
    (
        umask 077
        cat >"$env_file" <<'ENV'
# kgate settings, read by kgate.service. Keep this file mode 0600.
#KGATE_ACCESS_TOKEN=change-me
#KGATE_LISTEN=127.0.0.1:44772
#KGATE_OPTS=--kernel-path /opt/kernels
ENV
    )
fi

if [[ -z $destdir && -d /run/systemd/system ]]; then
    systemctl daemon-reload
    if [[ $enable -eq 1 ]]; then
        systemctl enable kgate.service
        systemctl restart kgate.service
    fi
elif [[ $enable -eq 1 ]]; then
    echo "install.sh: systemd is not running here (or DESTDIR is set): not enabling kgate.service" >&2
fi
echo "installed: $destdir/usr/local/bin/kgate, $destdir/etc/systemd/system/kgate.service ($env_file)"
