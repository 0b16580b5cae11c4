#!/usr/bin/env bash
# Installs the Debian 12 packages stepcast needs (idempotent; as root, or through sudo),
# then configures and builds. Usage:
#   scripts/setup.sh [--build-dir DIR] [--sanitize] [--no-gui] [-- extra cmake args]
# The executor's cpu_mpi backend (Eigen, Open MPI) is always built; the cuda_nccl backend
# when nvcc is found (/usr/local/cuda). The Qt 6 GUI (stepcast-gui) and its tests are built
# unless --no-gui; Xvfb runs its tests on a real X server as well as offscreen.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
sanitize=OFF
gui=ON
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --sanitize) sanitize=ON; shift ;;
    --no-gui) gui=OFF; shift ;;
    --all-deps) shift ;;  # accepted for old command lines: everything is installed now
    --) shift; extra=("$@"); break ;;
    *) echo "setup.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

packages=(cmake ninja-build g++ pkg-config
          nlohmann-json3-dev libcli11-dev libfmt-dev libsimgrid-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          libeigen3-dev zlib1g-dev libopenmpi-dev openmpi-bin)
if [ "$gui" = ON ]; then
  # libqt6opengl6-dev explicitly: qt6-charts-dev only recommends it and find_package(Qt6
  # Charts) fails without it. xvfb + xauth: xvfb-run for the GUI tests on an X server.
  packages+=(qt6-base-dev qt6-charts-dev libqt6opengl6-dev xvfb xauth)
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

# MPI under the sanitizers reports Open MPI's own leaks: the sanitized build exercises the
# runner through the in-memory communicator and leaves MPI and CUDA out.
mpi=ON
cuda=OFF
if [ "$sanitize" = ON ]; then mpi=OFF; fi
if [ "$sanitize" = OFF ] && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  cuda=ON
  export PATH="$PATH:/usr/local/cuda/bin"
fi
# Line tables only (-g1): stack traces and perf keep file:line, and a clean build takes
# about a third less time than with full -g (CI builds twice on two cores). The sanitized
# build at -O1 (the AddressSanitizer docs recommend -O1 or higher): half the compile time
# of -O2. docs/testing.md, "Build time".
# Unity builds: each target's sources compile in batches, so CLI11, nlohmann/json, Qt and
# GoogleTest headers are parsed once per batch (docs/testing.md, "Build time"; the
# top-level CMakeLists.txt lists the targets that opt out).
opt="-O2 -g1 -DNDEBUG"
if [ "$sanitize" = ON ]; then opt="-O1 -g1 -DNDEBUG"; fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
  -DSTEPCAST_SANITIZE="$sanitize" -DSTEPCAST_WITH_SIMGRID=ON \
  -DSTEPCAST_WITH_MPI="$mpi" -DSTEPCAST_WITH_CUDA="$cuda" -DSTEPCAST_BUILD_GUI="$gui" \
  -DSTEPCAST_BUILD_TESTS=ON -DSTEPCAST_BUILD_BENCH=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 "${extra[@]}"
cmake --build "$build_dir"
