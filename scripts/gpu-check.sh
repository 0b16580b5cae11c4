#!/usr/bin/env bash
# The GPU check of the executor, for a machine with one NVIDIA GPU (the `device` tool's
# H200, or any CUDA machine): builds with CUDA, sweeps GEMMs (achieved vs the preset's
# peak), executes a single-GPU plan, calibrates on it and predicts a second plan.
#   OUT=gpu-out scripts/gpu-check.sh [BUILD_DIR] [GPU_PRESET]   (defaults: build-gpu, h200-sxm)
# Everything it measures lands in $OUT (commit it under docs/data/executor-gpu/).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
gpu="${2:-h200-sxm}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi > "$out/nvidia-smi.txt" || true
scripts/setup.sh --build-dir "$build" -- -DSTEPCAST_BUILD_TESTS=OFF -DSTEPCAST_BUILD_BENCH=OFF 2>&1 | tail -3
bin="$build/cli/stepcast"
grep -q "STEPCAST_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" || { echo "gpu-check: no CUDA in $build" >&2; exit 1; }
"$bin" bench gemm --backend cuda_nccl --gpu "$gpu" --max-size 16384 | tee "$out/bench-gemm.txt"
"$bin" bench gemm --backend cuda_nccl --gpu "$gpu" --max-size 16384 --json "$out/bench-gemm.json"
"$bin" execute scenarios/execute/gpu-1x-h200.json --backend cuda_nccl --warmup 3 --steps 10 --out "$out/run-a" | tee "$out/execute-a.txt"
"$bin" execute scenarios/execute/gpu-1x-h200-recompute.json --backend cuda_nccl --warmup 3 --steps 10 --out "$out/run-b" | tee "$out/execute-b.txt"
"$bin" calibrate "$out/run-a/measured.json" --bench "$out/bench-gemm.json" --holdout "$out/run-b/measured.json" \
  --out "$out/calibration.json" | tee "$out/calibrate.txt"
"$bin" compare scenarios/execute/gpu-1x-h200.json "$out/run-a/measured.json" > "$out/compare-a.txt"
rm -f "$out"/run-*/trace.json   # large; measured.json keeps every span
echo "gpu-check: wrote $out"
