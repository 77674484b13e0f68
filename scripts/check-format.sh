#!/usr/bin/env bash
# Every tracked C++ source is clang-format clean (.clang-format: Google style, 100 columns):
# ctest `format`. Prints the offending places and exits 1; exits 3 (the test's skip code) when
# clang-format is not installed (scripts/install-deps.sh installs it). Fix with
#   git ls-files '*.cc' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "format: clang-format not found (apt-get install clang-format); not checked"
  exit 3
fi
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name '*.cc' -o -name '*.h')
if ! clang-format --dry-run -Werror $files; then
  echo "format: the files above are not clang-format clean; fix with:" >&2
  echo "  git ls-files '*.cc' '*.h' | xargs clang-format -i" >&2
  exit 1
fi
echo "format: ok ($(wc -w <<<"$files") files, $(clang-format --version))"
