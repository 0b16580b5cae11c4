#!/usr/bin/env bash
# Installs, builds and runs the main job on a shipped scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
./build/cli/stepcast estimate scenarios/llama3-70b-64xh100.json
