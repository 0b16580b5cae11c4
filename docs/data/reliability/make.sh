#!/usr/bin/env bash
# Regenerates every command output shown in docs/reliability.md:
#   docs/data/reliability/make.sh [BUILD_DIR]   (default build/)
# Each command runs exactly as the doc shows it, in a scratch directory whose scenarios/ links
# to the repository's, so relative paths and file names (sweep.csv) are those of the doc.
# The outputs are deterministic (seeded): a rerun on the same commit is byte-identical.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
bin="$(cd "${1:-build}" && pwd)/cli/stepcast"
out=$root/docs/data/reliability
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$root/scenarios" "$tmp/scenarios"
cd "$tmp"
"$bin" checkpoint scenarios/llama3-405b-16384xh100-reliability.json > "$out/checkpoint-405b.txt"
"$bin" checkpoint scenarios/llama3-405b-16384xh100-reliability.json --json > "$out/checkpoint-405b.json"
"$bin" checkpoint scenarios/llama3-8b-16xh100-daly-limit.json --csv sweep.csv > "$out/checkpoint-daly-limit.txt"
cp sweep.csv "$out/daly-limit-sweep.csv"
echo "wrote $out"
