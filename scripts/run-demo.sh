#!/usr/bin/env bash
# `make run`: `inac serve --demo` (the embedded defaults: SQLite file inac-demo.db beside it, the
# fat-tree k=4 demo fabric of emulated switches in the process, three sample jobs; it prints the
# dashboard's URL and an admin token). Runs until Ctrl-C.
set -euo pipefail
BUILD=${1:-build}
INAC="$BUILD/cli/inac"
[ -x "$INAC" ] || { echo "run-demo: $INAC not built" >&2; exit 1; }
# The demo listens on 127.0.0.1:8080: say what holds it instead of a bare "Address already in use"
# (most often the README tour's own `inac serve`, still running in the background).
if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
  echo "run-demo: 127.0.0.1:8080 is already in use, so the demo cannot listen there." >&2
  if command -v ss >/dev/null 2>&1; then
    ss -ltnp 'sport = :8080' 2>/dev/null | tail -n +2 | sed 's/^/run-demo:   /' >&2 || true
  fi
  echo "run-demo: stop it (e.g. the tour's: kill %1, or pkill -f 'inac serve'), or run the" \
       "demo elsewhere: $INAC serve --demo --listen 127.0.0.1:8081" >&2
  exit 1
fi
exec "$INAC" serve --demo
