#!/usr/bin/env bash
# Regenerates every command output shown in docs/incident-walkthrough.md:
#   docs/data/incident-walkthrough/make.sh [BUILD_DIR]   (default build/)
# Each command runs exactly as the doc shows it (`stepcast` is BUILD_DIR/cli/stepcast), in a
# scratch directory whose scenarios/ links to the repository's, so relative paths and the trace
# file names are those of the doc. Standard output is kept; the exit status (the doc's
# "# exit N" comments) is appended as a last line "# exit N". Deterministic: a rerun on the
# same commit is byte-identical.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 2
root=$PWD
bin="$(cd "${1:-build}" && pwd)/cli/stepcast"
out=$root/docs/data/incident-walkthrough
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$root/scenarios" "$tmp/scenarios"
cd "$tmp" || exit 2
stepcast() { "$bin" "$@"; }
# run NAME ARGS...: stdout to NAME.txt, then "# exit N"
run() { local name=$1; shift; stepcast "$@" > "$out/$name.txt"; echo "# exit $?" >> "$out/$name.txt"; }
run check check scenarios/incident/
run diagnose-8gpu diagnose scenarios/incident/8gpu.json
run compare-8gpu-64gpu compare scenarios/incident/8gpu.json scenarios/incident/64gpu.json
run diagnose-64gpu diagnose scenarios/incident/64gpu.json
run simulate-64gpu simulate scenarios/incident/64gpu.json --steps 10 --trace run64.json
run diagnose-run64-trace diagnose run64.json
run diagnose-restart diagnose scenarios/incident/restart.json
run diagnose-hang diagnose scenarios/incident/hang.json
run simulate-hang simulate scenarios/incident/hang.json --steps 10 --trace hang-trace.json
run diagnose-hang-trace diagnose hang-trace.json
run diagnose-64gpu-json diagnose scenarios/incident/64gpu.json --json
echo "wrote $out"
