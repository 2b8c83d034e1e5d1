#!/usr/bin/env bash
# Installs what libpathways needs on Debian 12, skipping what is present.
# Usage: scripts/deps.sh            build + test dependencies
#        scripts/deps.sh --bench    also the peers bench/compare measures
#                                   (oneTBB, StarPU, Dask; OpenMP comes
#                                   with gcc)
#        scripts/deps.sh --trace-view   also what scripts/trace-view drives
#                                   (chromium, node and npm)
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang libclang-rt-14-dev strace
  libck-dev libcbor-dev libzstd-dev libxxhash-dev libcriterion-dev
  python3-cffi python3-dev python3-numpy python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel
  libjansson-dev
  libmicrohttpd-dev python3-prometheus-client
  libnng-dev libmbedtls-dev libucx-dev iproute2
  openssl
)

# Optional: peer runtimes for `bench/compare` (bench/peers), not needed to
# build or test libpathways; CI does not install them.
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(libtbb-dev libstarpu-dev python3-dask) ;;
    --trace-view) packages+=(chromium nodejs); command -v npm >/dev/null 2>&1 || packages+=(npm) ;;
    *) echo "deps: unknown option '$arg' (--bench, --trace-view)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
