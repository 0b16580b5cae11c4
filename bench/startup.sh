#!/usr/bin/env bash
# Start-up cost of the `stepcast` command (issue 14 target: < 30 ms wall and < 30 MB max
# RSS for commands that need neither SimGrid, MPI nor CUDA). Runs each command N times
# (default 20) after one warm-up run and prints the median and the range of the wall time
# and of the maximum resident set size. See docs/performance.md, "Start-up".
#   bench/startup.sh [--runs N] [--bin build/cli/stepcast]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20
bin=build/cli/stepcast
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "usage: bench/startup.sh [--runs N] [--bin PATH]" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "startup.sh: $bin is not built (ninja -C build stepcast)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "startup.sh: needs GNU time (/usr/bin/time; apt-get install time)" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One command: wall time from the shell's clock in ns (GNU time's %e has 10 ms resolution),
# max RSS from GNU time (%M, KiB).
measure() {
  local walls="" rss=""
  "$@" > /dev/null 2>&1 || { echo "startup.sh: '$*' failed" >&2; exit 1; }  # warm-up (page cache)
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    /usr/bin/time -f "%M" -o "$tmp" "$@" > /dev/null 2>&1
    t1=$(date +%s%N)
    walls+="$(( (t1 - t0) / 1000 ))"$'\n'
    rss+="$(tail -n 1 "$tmp")"$'\n'
  done
  local wm rm wmin wmax rmin rmax
  wm=$(printf '%s' "$walls" | median)
  rm=$(printf '%s' "$rss" | median)
  wmin=$(printf '%s' "$walls" | sort -n | head -n 1)
  wmax=$(printf '%s' "$walls" | sort -n | tail -n 1)
  rmin=$(printf '%s' "$rss" | sort -n | head -n 1)
  rmax=$(printf '%s' "$rss" | sort -n | tail -n 1)
  awk -v c="$*" -v wm="$wm" -v wmin="$wmin" -v wmax="$wmax" -v rm="$rm" -v rmin="$rmin" -v rmax="$rmax" \
    'BEGIN { printf "%-60s %8.1f ms (%.1f-%.1f)  %7.1f MB (%.1f-%.1f)\n", c, wm / 1000, wmin / 1000, wmax / 1000,
             rm / 1024, rmin / 1024, rmax / 1024 }'
}

echo "$runs runs each, median (min-max); wall time includes GNU time's fork+exec (~1 ms)"
printf '%-60s %8s %21s\n' "command" "wall" "max RSS"
measure "$bin" presets
measure "$bin" estimate scenarios/llama3-70b-64xh100.json
echo "libraries loaded by '$bin presets':"
LD_DEBUG=files "$bin" presets 2>&1 > /dev/null | sed -n 's/.*file=\([^ ]*\) .*/  \1/p' | sort -u | tr -d '\n' | fold -w 100
echo
