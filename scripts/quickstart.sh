#!/usr/bin/env bash
# Installs, builds and runs the main job on a shipped scenario: which parallel layout should
# Llama-3-70B use on 64 H100 (docs/planner.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
./build/cli/stepcast plan scenarios/plan/llama3-70b-64xh100.json
