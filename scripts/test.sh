#!/usr/bin/env bash
# Installs, builds and runs every test. With --sanitize: the same suite built with
# AddressSanitizer and UndefinedBehaviorSanitizer in build-sanitize/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  scripts/setup.sh --build-dir build-sanitize --sanitize -- -DSTEPCAST_BUILD_BENCH=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The GUI flows run once here, offscreen: their Xvfb copies (label xvfb) exercise the
  # display stack, not our code, and the plain run has them.
  # (The gtest Simgrid* tests run without leak checking: tests/CMakeLists.txt, docs/testing.md.)
  ctest --test-dir build-sanitize --output-on-failure -j2 -LE xvfb
else
  scripts/setup.sh
  ctest --test-dir build --output-on-failure -j2
fi
