#!/usr/bin/env bash
# CTest entry of the REST API's contract test (tests/CMakeLists.txt, label `contract`):
#   run.sh <inac binary> <api/openapi.yaml>
# Skips (exit 77, CTest's SKIP_RETURN_CODE) with the reason when node or the npm packages are
# missing (scripts/install-deps.sh installs both).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
inac="${1:?usage: run.sh <inac binary> <api/openapi.yaml>}"
spec="${2:?usage: run.sh <inac binary> <api/openapi.yaml>}"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node not found (scripts/install-deps.sh)"
  exit 77
fi
for package in ajv ajv-formats yaml; do
  if [ ! -f "$here/node_modules/$package/package.json" ]; then
    echo "SKIP: $here/node_modules/$package is missing (run: cd tests/contract && npm ci, or scripts/install-deps.sh)"
    exit 77
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "SKIP: node $(node --version) is older than this test needs (20)"
  exit 77
fi
cd "$here"
INAC_BIN="$inac" INAC_OPENAPI="$spec" \
  exec node --test --test-reporter=spec --test-concurrency=1 contract.test.mjs
