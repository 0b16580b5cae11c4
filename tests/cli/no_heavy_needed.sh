#!/bin/sh
# The stepcast binary must not link Open MPI, CUDA, cuBLAS(Lt) or NCCL: they are plugins
# loaded when a command asks for them (docs/executor.md, "Plugins"). Usage: no_heavy_needed.sh BINARY
set -eu
needed=$(readelf -d "$1" | grep NEEDED || true)
bad=$(printf '%s\n' "$needed" | grep -Ei 'mpi|cuda|cublas|nccl' || true)
if [ -n "$bad" ]; then
  echo "$1 links libraries that must be plugins:"
  echo "$bad"
  exit 1
fi
echo "$1: no MPI/CUDA/cuBLAS/NCCL in NEEDED"
printf '%s\n' "$needed"
