#!/usr/bin/env bash
# docs/architecture.md's layers, checked on the includes of every tracked source of the production
# layers (ctest `layering`): core/ includes nothing of ours but core/; scheduler/, storage/ and
# southbound/ only core/ and themselves (never each other); agent/ only core/ and itself;
# nothing but server/ (and tests, benchmarks) includes server/. Prints every violation as
# FILE:LINE: #include "X" (LAYER may not include OTHER) and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [core]="core"
  [scheduler]="core scheduler"
  [storage]="core storage"
  [southbound]="core southbound"
  [agent]="core agent"
)
layers="core scheduler storage southbound agent server"
violations=0
files=$(git ls-files 'core/*' 'scheduler/*' 'storage/*' 'southbound/*' 'agent/*' 2>/dev/null ||
        find core scheduler storage southbound agent -type f)
for f in $files; do
  case "$f" in *.cc|*.h) ;; *) continue ;; esac
  layer=${f%%/*}
  while IFS=: read -r line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
    other=${inc%%/*}
    [[ " $layers " == *" $other "* ]] || continue  # not one of our layers (api/, tests/, libs)
    if [[ " ${allowed[$layer]} " != *" $other "* ]]; then
      echo "$f:$line: #include \"$inc\" ($layer may not include $other)"
      violations=$((violations + 1))
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
done
if [ "$violations" -gt 0 ]; then
  echo "layering: $violations include(s) break the layers of docs/architecture.md" >&2
  exit 1
fi
echo "layering: ok"
