#!/bin/sh
# deploy/execd/rootfs.sh: makes (once) the root filesystem of "a user's image" for the drop-in e2e test
# (tests/e2e/test_dropin.c): a minimal Debian of another release than the build host's, made by
# debootstrap, with python3 and ipykernel and none of kgate's own libraries (h2o, jansson, wslay).
#
# Usage: deploy/execd/rootfs.sh [DIR]   (default: $KGATE_CACHE_DIR/rootfs-<suite>, KGATE_CACHE_DIR
#        defaulting to $HOME/.cache/kgate). Prints the directory. KGATE_ROOTFS_SUITE (default trixie) and
#        KGATE_ROOTFS_MIRROR (default http://deb.debian.org/debian) choose what is made.
# The tree is made in DIR.tmp and renamed when complete, so a DIR that exists is whole: reruns and CI cost
# nothing after the first (about 2 minutes and 250 MB here). Needs root (debootstrap chroots).
set -eu
suite=${KGATE_ROOTFS_SUITE:-trixie}
mirror=${KGATE_ROOTFS_MIRROR:-http://deb.debian.org/debian}
cache=${KGATE_CACHE_DIR:-${HOME:-/tmp}/.cache/kgate}
dir=${1:-$cache/rootfs-$suite}
if [ -x "$dir/usr/bin/python3" ]; then
    # the mount point of the volume that holds execd (Kubernetes mounts its emptyDir there; the test binds a directory)
    mkdir -p "$dir/opt/opensandbox"
    echo "$dir"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "rootfs.sh: debootstrap needs root" >&2
    exit 1
fi
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
# minbase: no init system, no apt recommends; python3-ipykernel brings python3 and its kernelspec. debootstrap does not
# resolve virtual packages: python3-zmq's python3-cffi-backend-api-* come from python3-cffi-backend, named here. The
# downloaded packages stay in debs-<suite> so that a second attempt downloads nothing.
mkdir -p "$cache/debs-$suite"
debootstrap --variant=minbase --include=python3-ipykernel,python3-cffi-backend --cache-dir="$cache/debs-$suite" \
    "$suite" "$dir.tmp" "$mirror" >"$dir.tmp.log" 2>&1 || {
    echo "rootfs.sh: debootstrap $suite failed; its log:" >&2
    tail -20 "$dir.tmp.log" >&2
    exit 1
}
mkdir -p "$dir.tmp/opt/opensandbox"
mv "$dir.tmp" "$dir"
rm -f "$dir.tmp.log"
echo "$dir"
