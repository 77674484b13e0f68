#!/usr/bin/env bash
# Installs every Debian package INAC needs to build, test and run. Idempotent: packages that are
# already installed are skipped, and nothing is downloaded from outside Debian's archive.
set -euo pipefail

PACKAGES=(
  build-essential cmake g++ make pkg-config
  libcpp-httplib-dev nlohmann-json3-dev
  libsqlite3-dev libsqlitecpp-dev sqlite3
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  coinor-libclp-dev coinor-libcbc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libcli11-dev libabsl-dev
  libgloo-dev
  python3-torch python3-sklearn
  prometheus-cpp-dev
  libssl-dev
  clang-format
  clang libfuzzer-14-dev libclang-rt-14-dev
  curl
  etcd-server etcd-client
  chromium
)
# The dashboard's browser test (tests/browser, docs/dashboard.md) and the API contract test
# (tests/contract) run on Node.js with npm; the machine's own Node.js (>= 20) is kept when present,
# Debian's otherwise.
if ! command -v node >/dev/null 2>&1; then PACKAGES+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The reference P4 toolchain (p4c, BMv2 simple_switch_grpc) is not packaged by Debian 12; where
# this workplace provides it beside the repository (../shared/peers), install the Debian runtime
# libraries it links against so that the interop and data-plane tests can run it. Elsewhere those
# tests skip with a message (README: "INAC against BMv2").
peers="$(cd "$(dirname "$0")/.." && pwd)/../shared/peers"
if [ -x "$peers/install-runtime-deps.sh" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    if ! out=$(bash "$peers/install-runtime-deps.sh" 2>&1); then
      echo "$out" >&2
      echo "install-deps: the P4 peers' runtime libraries could not be installed" >&2
      exit 1
    fi
    echo "install-deps: P4 peers ready ($peers/bin)"
  else
    echo "install-deps: run as root to install the P4 peers' runtime libraries ($peers)" >&2
  fi
fi

# The npm packages of the Node.js tests, each folder pinned by its package-lock.json: the browser
# test's playwright-core (which drives Debian's chromium and downloads no browser), and the API
# contract test's validator (ajv, ajv-formats, yaml).
for folder in browser contract; do
  node_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/$folder"
  if [ -f "$node_tests/package-lock.json" ] && command -v npm >/dev/null 2>&1; then
    if (cd "$node_tests" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
      echo "install-deps: $folder test packages ready ($node_tests/node_modules)"
    else
      echo "install-deps: npm ci failed in $node_tests; the $folder test will skip" >&2
    fi
  fi
done
