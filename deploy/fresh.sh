#!/usr/bin/env bash
# deploy/fresh.sh: runs a command of this checkout in a fresh Debian 12, to check that the README's two commands need
# nothing this machine happens to have: debootstrap makes a minimal bookworm (once, in DIR), this checkout's tracked
# files are copied into it, and the command runs there as root, in mount and pid namespaces of its own entered by
# pivot_root (a chrooted process may not make the user namespaces bubblewrap needs), with the host's network.
#
# Usage: deploy/fresh.sh [--dir DIR] [--new] [COMMAND]
#   COMMAND defaults to `CI=true bash deploy/test.sh`; it runs in the copy (/kgate). --new makes the tree again, so that
#   deps.sh installs everything from nothing. DIR defaults to $KGATE_CACHE_DIR/fresh-bookworm ($HOME/.cache/kgate).
# Needs root, debootstrap and unshare. What the tree gets of the host: its apt sources (debian.sources, when present),
# its extra CA certificates and npmrc (a proxy's, where the registries are reached through one), and an /etc/hosts
# as Debian's installer writes it. Takes a few minutes for the tree, then as long as the command.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${KGATE_CACHE_DIR:-${HOME:-/tmp}/.cache/kgate}/fresh-bookworm
new=0
while [[ $# -gt 0 ]]; do
    case "$1" in
    --dir)
        dir=$2
        shift 2
        ;;
    --new)
        new=1
        shift
        ;;
    -h | --help)
        sed -n '2,12s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *) break ;;
    esac
done
command=${1:-CI=true bash deploy/test.sh}
if [[ $(id -u) -ne 0 ]]; then
    echo "fresh.sh: needs root (debootstrap, namespaces)" >&2
    exit 1
fi

if [[ $new -eq 1 || ! -x $dir/root/usr/bin/apt-get ]]; then
    rm -rf "$dir/root"
    mkdir -p "$dir"
    echo "fresh.sh: debootstrap bookworm into $dir/root" >&2
    debootstrap --variant=minbase bookworm "$dir/root" http://deb.debian.org/debian >"$dir/debootstrap.log" 2>&1 || {
        tail -20 "$dir/debootstrap.log" >&2
        exit 1
    }
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        cp /etc/apt/sources.list.d/debian.sources "$dir/root/etc/apt/sources.list.d/"
        rm -f "$dir/root/etc/apt/sources.list"
    fi
    mkdir -p "$dir/root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$dir/root/usr/local/share/ca-certificates/" 2>/dev/null || true
    [[ ! -f /etc/npmrc ]] || cp /etc/npmrc "$dir/root/etc/npmrc"
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/root/etc/hosts"
fi
# the checkout as it is committed, nothing of its builds
rm -rf "$dir/root/kgate"
mkdir -p "$dir/root/kgate" "$dir/root/.oldroot"
git -C "$repo" archive HEAD | tar -x -C "$dir/root/kgate"

ca=/etc/ssl/certs/ca-certificates.crt
# shellcheck disable=SC2016 # expanded by the inner shell
exec unshare --mount --pid --fork --propagation private bash -c '
set -e
R=$1
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
cd "$R"
pivot_root . .oldroot
umount -l /.oldroot
cd /kgate
exec env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
    NODE_EXTRA_CA_CERTS="$3" SSL_CERT_FILE="$3" CURL_CA_BUNDLE="$3" bash -c "$2"
' fresh "$dir/root" "$command" "$ca"
