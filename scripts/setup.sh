#!/usr/bin/env bash
# Installs the Debian 12 packages stepcast needs (idempotent; as root, or through sudo),
# then configures and builds. Usage:
#   scripts/setup.sh [--build-dir DIR] [--sanitize] [--all-deps] [-- extra cmake args]
# --all-deps also installs the optional backends' packages (Eigen, Open MPI, Qt 6).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
sanitize=OFF
all_deps=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --sanitize) sanitize=ON; shift ;;
    --all-deps) all_deps=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "setup.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

packages=(cmake ninja-build g++ pkg-config
          nlohmann-json3-dev libcli11-dev libfmt-dev libsimgrid-dev
          libgtest-dev libgmock-dev libbenchmark-dev)
if [ "$all_deps" = 1 ]; then
  packages+=(libeigen3-dev libopenmpi-dev openmpi-bin
             qt6-base-dev qt6-charts-dev libqt6opengl6-dev xvfb xauth)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
    echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTEPCAST_SANITIZE="$sanitize" -DSTEPCAST_WITH_SIMGRID=ON "${extra[@]}"
cmake --build "$build_dir"
