#!/usr/bin/env bash
# Regenerates the command outputs shown in the docs: runs every docs/data/*/make.sh except
# docs/data/executor-cpu/make.sh (it needs an MPI build, minutes and an idle machine; run it
# by hand). Speed figures are bench/perf.sh's and bench/startup.sh's, not this script's.
#   docs/make-all.sh [BUILD_DIR]   (default build/)
# Then `git diff docs/data` shows what changed; update the docs' shown outputs to match.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
for s in docs/data/*/make.sh; do
  [ "$s" = docs/data/executor-cpu/make.sh ] && continue
  echo "== $s"
  "$s" "$build"
done
