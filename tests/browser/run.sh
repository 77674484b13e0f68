#!/usr/bin/env bash
# CTest entry of the dashboard's browser test (tests/CMakeLists.txt, label `browser`):
#   run.sh <inac binary> <output folder>
# Skips (exit 77, CTest's SKIP_RETURN_CODE) with the reason when chromium, node or the npm
# packages are missing (scripts/install-deps.sh installs all three).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
inac="${1:?usage: run.sh <inac binary> <output folder>}"
out="${2:?usage: run.sh <inac binary> <output folder>}"
chromium="${INAC_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  echo "SKIP: $chromium not found (apt-get install chromium, or scripts/install-deps.sh)"
  exit 77
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node not found (scripts/install-deps.sh)"
  exit 77
fi
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  echo "SKIP: $here/node_modules is missing (run: cd tests/browser && npm ci, or scripts/install-deps.sh)"
  exit 77
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "SKIP: node $(node --version) is older than playwright-core needs (20)"
  exit 77
fi
mkdir -p "$out"
cd "$here"
INAC_BIN="$inac" INAC_BROWSER_OUT="$out" INAC_CHROMIUM="$chromium" \
  exec node --test --test-reporter=spec --test-concurrency=1 dashboard.test.mjs
