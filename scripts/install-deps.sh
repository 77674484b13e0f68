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
  curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
