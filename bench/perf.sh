#!/usr/bin/env bash
# Runs the speed measurements of docs/performance.md and writes docs/data/performance/perf.txt:
#   bench/perf.sh [BUILD_DIR]   (default build/; needs stepcast and stepcast_bench built,
#                                -DSTEPCAST_WITH_SIMGRID=ON for the SimGrid rows, and GNU time)
# The report starts with the machine, the date, the git commit and the load average before and
# after: wall times depend on the machine and on what else runs on it, so read them with those.
# Start-up is measured separately by bench/startup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
bin="$build/cli/stepcast"
bench="$build/bench/stepcast_bench"
out=docs/data/performance/perf.txt
[ -x "$bin" ] && [ -x "$bench" ] || { echo "perf.sh: build stepcast and stepcast_bench in $build first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "perf.sh: needs GNU time (/usr/bin/time)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
timed() {  # the doc's /usr/bin/time line, then the command
  echo "\$ /usr/bin/time -f \"%e s wall, %U s user, %M KB max RSS\" $* > /dev/null"
  /usr/bin/time -f "%e s wall, %U s user, %M KB max RSS" "$@" 2>&1 > /dev/null | tail -n 1
}
{
  echo "# bench/perf.sh $build"
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $(nproc), memory $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit:  $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)')"
  echo "build:   $(grep -m1 '^CMAKE_BUILD_TYPE' "$build/CMakeCache.txt" | sed 's/.*=//')"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "\$ $bench --benchmark_filter='Estimate|Simulate' --benchmark_min_time=0.5"
  "$bench" --benchmark_filter='Estimate|Simulate' --benchmark_min_time=0.5 2>&1
  echo
  timed "$bin" simulate bench/scenarios/llama3-405b-16384xh100.json --full
  echo
  timed "$bin" simulate bench/scenarios/gpt3-175b-1024xh100-simgrid.json
  echo
  echo "\$ $bench --benchmark_filter=Plan --benchmark_min_time=2"
  "$bench" --benchmark_filter=Plan --benchmark_min_time=2 2>&1
  echo
  timed "$bin" plan scenarios/plan/llama3-405b-16384xh100.json --threads 2
  timed "$bin" plan scenarios/plan/llama3-70b-64xh100.json
  echo
  echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
} > "$out"
echo "wrote $out"
