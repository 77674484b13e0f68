#!/usr/bin/env bash
# Compiles api/p4/ina.p4 with p4c (BMv2 back end, v1model) and writes the artifacts INAC commits
# and embeds, as ONOS pipeconf apps commit theirs:
#   api/p4/ina.json          the BMv2 device config (p4c's JSON), pushed to `bmv2` targets
#   api/p4/ina.p4info.txtpb  the P4Info (text format), exactly as p4c emits it
#   api/p4/p4c-version.txt   which p4c made them (not compared by --check)
#
# Usage: scripts/compile-p4.sh [--out DIR] [--check]
#   --out DIR  write into DIR instead of api/p4/ (the artifacts test compiles into a temp dir)
#   --check    compile into a temp dir and fail (exit 1) when the committed files differ
# Any compiler warning is an error (exit 1). Exit 3 when p4c is not found (see find-p4-peers.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=find-p4-peers.sh
source "$repo/scripts/find-p4-peers.sh"

out="$repo/api/p4"
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "compile-p4: unknown argument $1 (usage: compile-p4.sh [--out DIR] [--check])" >&2; exit 2 ;;
  esac
done

if [ -z "$INAC_P4C_BIN" ]; then
  echo "compile-p4: p4c-bm2-ss not found (set INAC_P4C, put it on PATH, or place ../shared/peers)" >&2
  exit 3
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $check -eq 1 ]; then target=$work/out; else target=$out; fi
mkdir -p "$target"

# Compile from inside api/p4 so that source paths in the JSON are the same on every machine.
cd "$repo/api/p4"
env_include=()
[ -n "$INAC_P4C_INCLUDE" ] && env_include=(env "P4C_16_INCLUDE_PATH=$INAC_P4C_INCLUDE")
if ! "${env_include[@]}" "$INAC_P4C_BIN" --arch v1model --std p4-16 \
      --p4runtime-files "$work/ina.p4info.txtpb" -o "$work/ina.json" ina.p4 \
      > "$work/p4c.log" 2>&1; then
  cat "$work/p4c.log" >&2
  echo "compile-p4: p4c failed" >&2
  exit 1
fi
if [ -s "$work/p4c.log" ]; then
  cat "$work/p4c.log" >&2
  echo "compile-p4: p4c printed warnings (treated as errors)" >&2
  exit 1
fi
version=$("$INAC_P4C_BIN" --version 2>&1 | grep -m1 Version || echo "unknown version")
{
  echo "# P4Info of api/p4/ina.p4 as emitted by p4c (api/p4/p4c-version.txt), written by"
  echo "# scripts/compile-p4.sh."
  echo "# Do not edit: change ina.p4 and run the script. Every id is pinned with @id in the program."
  cat "$work/ina.p4info.txtpb"
} > "$target/ina.p4info.txtpb"
cp "$work/ina.json" "$target/ina.json"
[ $check -eq 1 ] || echo "$version" > "$target/p4c-version.txt"

if [ $check -eq 1 ]; then
  status=0
  for f in ina.p4info.txtpb ina.json; do
    if ! cmp -s "$target/$f" "$out/$f"; then
      echo "compile-p4: api/p4/$f differs from p4c's output (run scripts/compile-p4.sh):" >&2
      diff -u "$out/$f" "$target/$f" | head -40 >&2 || true
      status=1
    fi
  done
  [ $status -eq 0 ] && echo "compile-p4: api/p4 artifacts equal p4c's output ($version)"
  exit $status
fi
echo "compile-p4: wrote $target/ina.json and $target/ina.p4info.txtpb ($version)"
