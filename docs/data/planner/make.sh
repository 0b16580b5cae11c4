#!/usr/bin/env bash
# Regenerates every command output shown in docs/planner.md:
#   docs/data/planner/make.sh [BUILD_DIR]   (default build/)
# Each command runs exactly as the doc shows it, from the repository root. The planner is
# deterministic (the engine runs are, and ties are broken by the layout): a rerun on the same
# commit is byte-identical.
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin="${1:-build}/cli/stepcast"
out=docs/data/planner
"$bin" plan scenarios/plan/llama3-70b-64xh100-failure-prone.json --top 3 > "$out/plan-failure-prone-top3.txt"
"$bin" plan scenarios/plan/llama3-70b-64xh100-failure-prone.json --explain "tp=2,pp=4,cp=4,sp=true,v=8,zero=2" > "$out/plan-failure-prone-explain.txt"
"$bin" plan scenarios/plan/llama3-70b-sweep-cost.json > "$out/plan-sweep-cost.txt"
"$bin" plan scenarios/plan/llama3-70b-64xh100.json --explain "tp=8,pp=4,sp=true,zero=1" > "$out/plan-70b-explain-tp8.txt"
"$bin" plan scenarios/plan/llama3-70b-64xh100.json --explain "tp=8,pp=4,sp=true,tpo=true,zero=1" > "$out/plan-70b-explain-tp8-tpo.txt"
"$bin" plan scenarios/plan/llama3-70b-64xh100.json --top 10 > "$out/plan-70b-top10.txt"
"$bin" plan scenarios/plan/llama3-70b-64xh100-megatron-recipe.json --top 5 > "$out/plan-megatron-top5.txt"
"$bin" plan scenarios/plan/llama3-70b-64xh100-megatron-recipe.json --explain "tp=4,pp=4,dp=2,cp=2,sp=true,tpo=true,v=5,mb=1,zero=1" > "$out/plan-megatron-explain.txt"
"$bin" plan scenarios/plan/qwen3-235b-a22b-256xh100-recipe.json --top 6 > "$out/plan-qwen3-recipe-top6.txt"
"$bin" plan scenarios/plan/qwen3-235b-a22b-256xh100-recipe.json --explain "tp=2,pp=8,v=4,ep=32,etp=1,sp=true,tpo=true,mb=1,zero=1" > "$out/plan-qwen3-recipe-explain.txt"
"$bin" plan scenarios/plan/qwen3-30b-a3b-16xh100-recompute-modules.json --top 12 > "$out/plan-qwen3-modules-top12.txt"
"$bin" plan scenarios/plan/qwen3-30b-a3b-16xh100-recompute-modules.json --explain "tp=1,pp=1,ep=8,mb=2,zero=1,recompute=selective,recompute_modules=moe_act" > "$out/plan-qwen3-modules-explain.txt"
echo "wrote $out"
