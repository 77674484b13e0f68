#!/usr/bin/env bash
# Finds the reference P4 tools: p4c's BMv2 back end and BMv2's simple_switch_grpc.
# Sourced by compile-p4.sh; the C++ tests and `inac lab` use the same order (tests/interop/peers.cc).
#
# Order: $INAC_P4C / $INAC_BMV2 (a file, or a folder holding the tool), then PATH, then
# ../shared/peers/bin beside the repository (this workplace's prebuilt toolchain).
# Sets INAC_P4C_BIN / INAC_BMV2_BIN (empty when not found) and INAC_P4C_INCLUDE (the folder with
# core.p4 and v1model.p4, empty when p4c finds its own).

_inac_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

_inac_find_tool() {  # env-value name...
  local env=$1; shift
  if [ -n "$env" ]; then
    if [ -d "$env" ]; then
      for n in "$@"; do [ -x "$env/$n" ] && { readlink -f "$env/$n"; return; }; done
    elif [ -x "$env" ]; then readlink -f "$env"; return; fi
  fi
  for n in "$@"; do
    local p; p=$(command -v "$n" 2>/dev/null || true)
    [ -n "$p" ] && { readlink -f "$p"; return; }
  done
  for n in "$@"; do
    [ -x "$_inac_repo/../shared/peers/bin/$n" ] && { readlink -f "$_inac_repo/../shared/peers/bin/$n"; return; }
  done
  return 0  # not found: empty output (callers run under set -e)
}

INAC_P4C_BIN=$(_inac_find_tool "${INAC_P4C:-}" p4c-bm2-ss)
INAC_BMV2_BIN=$(_inac_find_tool "${INAC_BMV2:-}" simple_switch_grpc)
INAC_P4C_INCLUDE=""
if [ -n "$INAC_P4C_BIN" ]; then
  for d in "$(dirname "$INAC_P4C_BIN")/../share/p4c/p4include" /usr/share/p4c/p4include \
           /usr/local/share/p4c/p4include; do
    if [ -f "$d/v1model.p4" ]; then INAC_P4C_INCLUDE=$(cd "$d" && pwd); break; fi
  done
fi
