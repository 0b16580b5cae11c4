#!/usr/bin/env bash
# Regenerates docs/gui/*.png: every view of stepcast-gui on shipped scenarios, drawn on a
# real X server (Xvfb, 1600 x 1000). Usage: scripts/gui-screenshots.sh [BUILD_DIR]
# (default build/; built with scripts/setup.sh when stepcast-gui is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
gui="$build/gui/stepcast-gui"
[ -x "$gui" ] || scripts/setup.sh --build-dir "$build"
XDG_RUNTIME_DIR="$(mktemp -d)"
export XDG_RUNTIME_DIR
trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
run() { xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" "$@"; }
mkdir -p docs/gui
# Every view of the planner's main scenario (Llama 3 70B on 64 H100: PP4, so the timeline
# shows the pipeline bubble; its failure model and training length drive the reliability
# view; the incidents view opens the shipped 8 -> 64 GPU story).
run --screenshots docs/gui scenarios/plan/llama3-70b-64xh100.json
# DDP: the gradient buckets' all-reduces overlapping the backward.
run --screenshots docs/gui --views timeline --prefix ddp- scenarios/gpt-1.3b-ddp-16xh100.json
# The editor with an invalid value: the loader's message beside the field.
sed 's/"tp": 8, "pp": 4/"tp": 3, "pp": 4/' scenarios/llama3-70b-64xh100.json > "$XDG_RUNTIME_DIR/invalid.json"
run --screenshots docs/gui --views scenario --prefix invalid- "$XDG_RUNTIME_DIR/invalid.json"
ls -l docs/gui/*.png
