#!/usr/bin/env bash
# `make run`: INAC's main job on its embedded defaults. Until the controller service (`inac serve
# --demo`) exists this generates the demo fabric (fat-tree k=4), validates it and the sample jobs,
# and, where `inac plan` exists, plans the sample jobs with GRID/InArt.
set -euo pipefail
BUILD=${1:-build}
INAC="$BUILD/cli/inac"
[ -x "$INAC" ] || { echo "run-demo: $INAC not built" >&2; exit 1; }

if "$INAC" serve --help >/dev/null 2>&1; then
  exec "$INAC" serve --demo
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== inac topo generate fat-tree --k 4"
"$INAC" topo generate fat-tree --k 4 --ina tor > "$out/topology.json"
"$INAC" topo validate "$out/topology.json"
echo "== inac job validate examples/fat-tree-k4/jobs.json"
"$INAC" job validate examples/fat-tree-k4/jobs.json --topology "$out/topology.json"
if "$INAC" plan --help >/dev/null 2>&1; then
  for alg in atp grid; do
    echo "== inac plan --algorithm $alg (GRID worked example)"
    "$INAC" plan --topology examples/grid-example/topology.json \
      --jobs examples/grid-example/jobs.json --algorithm "$alg"
  done
fi
