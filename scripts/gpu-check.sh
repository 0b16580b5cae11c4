#!/usr/bin/env bash
# The GPU check, for a machine with one NVIDIA GPU (the `device` tool's H200, or any CUDA
# machine):
#   1. kernel microbenchmarks through PyTorch when it is installed (scripts/gpu-microbench.py:
#      GEMM shape sweep in bf16 and fp8, SDPA attention kernels by sequence length, memory-bound
#      ops, fused AdamW, one eager training step);
#   2. the executor: sweeps GEMMs (achieved vs the preset's peak), executes a single-GPU plan,
#      calibrates on it and predicts a second plan.
#
#   OUT=gpu-out scripts/gpu-check.sh [BUILD_DIR] [GPU_PRESET]   (defaults: build-gpu, h200-sxm)
#   STEPCAST_BIN=path/to/stepcast OUT=gpu-out scripts/gpu-check.sh   (a prebuilt binary with
#       its plugin in ../lib/stepcast/: no build, for a machine without the apt packages)
#
# Each step runs under a time limit and the script goes on past a failed one; it exits 1 if
# any failed. Everything it measures lands in $OUT (committed under docs/data/executor-gpu/).
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
gpu="${2:-h200-sxm}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
failed=()
step() {  # step NAME SECONDS CMD...: run CMD with a limit, its output to the terminal and $out/NAME.txt
  local name="$1" limit="$2"
  shift 2
  echo "== gpu-check: $name"
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "gpu-check: $name failed (exit $rc)"; failed+=("$name"); }
}

if command -v nvidia-smi >/dev/null; then
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
  nvidia-smi -q -d CLOCK,POWER,PERFORMANCE > "$out/nvidia-smi-clocks.txt" 2>&1 || true
fi

if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  step microbench 900 env PYTHONUNBUFFERED=1 python3 scripts/gpu-microbench.py --out "$out"
else
  echo "gpu-check: no PyTorch with CUDA here; the kernel microbenchmarks are skipped"
fi

if [ -n "${STEPCAST_BIN:-}" ]; then
  bin="$STEPCAST_BIN"
else
  scripts/setup.sh --build-dir "$build" -- -DSTEPCAST_BUILD_TESTS=OFF -DSTEPCAST_BUILD_BENCH=OFF 2>&1 | tail -3
  bin="$build/cli/stepcast"
  grep -q "STEPCAST_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" || { echo "gpu-check: no CUDA in $build" >&2; exit 1; }
fi
step bench-gemm 300 "$bin" bench gemm --backend cuda_nccl --gpu "$gpu" --max-size 16384 --json "$out/bench-gemm.json"
step execute-a 300 "$bin" execute scenarios/execute/gpu-1x-h200.json --backend cuda_nccl --warmup 3 --steps 10 --out "$out/run-a"
step execute-b 300 "$bin" execute scenarios/execute/gpu-1x-h200-recompute.json --backend cuda_nccl --warmup 3 --steps 10 --out "$out/run-b"
step calibrate 120 "$bin" calibrate "$out/run-a/measured.json" --bench "$out/bench-gemm.json" \
  --holdout "$out/run-b/measured.json" --out "$out/calibration.json"
step compare-a 120 "$bin" compare scenarios/execute/gpu-1x-h200.json "$out/run-a/measured.json"
rm -f "$out"/run-*/trace.json   # large; measured.json keeps every span
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: wrote $out; failed: ${failed[*]}"
  exit 1
fi
echo "gpu-check: wrote $out"
