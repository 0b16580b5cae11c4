#!/usr/bin/env bash
# Formats the C++ and CUDA sources tracked by git with clang-format (.clang-format at the
# root), or checks them.
#   scripts/format.sh                 # rewrite every tracked *.h *.cc *.cu in place
#   scripts/format.sh --check         # exit 1 and list the files that would change
#   scripts/format.sh [--check] PATH  # only files under PATH (folders or files)
# CLANG_FORMAT=clang-format-14 picks the binary (default: clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" > /dev/null; then
  echo "format.sh: $cf not found (apt-get install clang-format, or set CLANG_FORMAT)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- "${@:-.}" | grep -E '\.(h|cc|cu|cuh)$' || true)
if [ ${#files[@]} -eq 0 ]; then
  echo "format.sh: no C++ files under ${*:-.}" >&2
  exit 0
fi
if [ $check -eq 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$cf" -i --style=file
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --style=file --dry-run -Werror "$f" > /dev/null 2>&1; then
    echo "$f"
    bad=1
  fi
done
if [ $bad -ne 0 ]; then
  echo "format.sh: the files above are not formatted (run scripts/format.sh)" >&2
fi
exit $bad
