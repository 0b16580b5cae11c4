#!/usr/bin/env bash
# Regenerates the measured CPU executor outputs of docs/executor.md on this machine:
#   docs/data/executor-cpu/make.sh [BUILD_DIR]   (default build/)
# Needs a build with -DSTEPCAST_WITH_MPI=ON (scripts/setup.sh). Run on an idle machine:
# the numbers are wall-clock times of 4 MPI ranks.
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin="${1:-build}/cli/stepcast"
out=docs/data/executor-cpu
tmp=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpirun -np 4 "$bin" execute scenarios/execute/cpu-tp2dp2.json --steps 5 --out "$tmp/a" > "$out/execute-tp2dp2.txt"
mpirun -np 4 "$bin" execute scenarios/execute/cpu-pp2-1f1b.json --steps 5 --out "$tmp/b" > "$out/execute-pp2-1f1b.txt"
"$bin" calibrate "$tmp/a/measured.json" --holdout "$tmp/b/measured.json" --out "$out/calibration.json" > "$out/calibrate-report.txt"
"$bin" bench gemm --max-size 512 > "$out/bench-gemm.txt"
"$bin" bench gemm --max-size 512 --json "$out/bench-gemm.json"
mpirun -np 4 "$bin" bench collectives --max-bytes 1048576 > "$out/bench-collectives.txt"
mpirun -np 4 "$bin" bench collectives --max-bytes 1048576 --json "$out/bench-collectives.json"
"$bin" diagnose "$tmp/a/trace.json" > "$out/diagnose-tp2dp2.txt"
# Offload run for real and its host rates (docs/executor.md "Optimizer offload").
mpirun -np 4 "$bin" execute scenarios/execute/cpu-tp2dp2-offload.json --steps 5 --out "$tmp/o" > "$out/execute-tp2dp2-offload.txt"
"$bin" calibrate "$tmp/o/measured.json" --out "$tmp/o-cal.json" > "$out/calibrate-offload.txt"
sed 's|"seed": 1,|"seed": 1, "calibration": "../../docs/data/executor-cpu/calibration.json",|' \
  scenarios/execute/cpu-pp2-1f1b.json > scenarios/execute/.pp2-calibrated.json
"$bin" simulate scenarios/execute/.pp2-calibrated.json > "$out/simulate-pp2-calibrated.txt" || true
rm -f scenarios/execute/.pp2-calibrated.json
# Paths of the temporary directory are replaced so reruns differ only in measurements.
sed -i "s|$tmp|/tmp/run|g" "$out"/*.txt "$out/calibration.json"
rm -rf "$tmp"
echo "wrote $out"
