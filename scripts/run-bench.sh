#!/usr/bin/env bash
# `make bench`: runs every benchmark executable under BUILD/bench and the CLI timing of
# `inac topo generate fat-tree --k 32`. Each benchmark prints JSON lines; bench/RESULTS.md quotes them.
set -euo pipefail
BUILD=${1:-build}
for b in "$BUILD"/bench/*_bench; do
  [ -x "$b" ] || continue
  echo "# $(basename "$b")" >&2
  "$b"
done
# The simulator's sweep (memory x model mix, PS turnaround) runs only when asked for by name.
"$BUILD/bench/sim_bench" sweep
start=$(date +%s%N)
"$BUILD/cli/inac" topo generate fat-tree --k 32 > /dev/null
end=$(date +%s%N)
echo "{\"bench\":\"cli_topo_generate\",\"k\":32,\"wall_ms\":$(( (end - start) / 1000000 ))}"
