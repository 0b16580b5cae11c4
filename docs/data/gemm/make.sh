#!/usr/bin/env bash
# Regenerates docs/gemm.md's outputs: `stepcast gemm` on the shapes the page shows.
#   docs/data/gemm/make.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin="${1:-build}/cli/stepcast"
out=docs/data/gemm
"$bin" gemm 8192 28672 4096 --gpu h100-sxm > "$out/gemm-8b-fc1-h100.txt"
"$bin" gemm 64 8192 8192 --gpu h200-sxm --backward > "$out/gemm-64-rows-h200.txt"
"$bin" gemm 64 8192 8192 --gpu h200-sxm --json > "$out/gemm-64-rows-h200.json"
"$bin" gemm 8192 8192 8192 --gpu h200-sxm --sweep > "$out/gemm-sweep-h200.txt"
"$bin" gemm --against docs/data/executor-gpu/bench-gemm.json --gpu h200-sxm > "$out/against-h200-bench.txt"
echo "wrote $out"
