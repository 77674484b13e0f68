#!/usr/bin/env bash
# docs/architecture.md's layers, checked on the includes of every tracked source of the production
# layers (ctest `layering`): core/ includes nothing of ours but core/; scheduler/, storage/ and
# southbound/ only core/ and themselves (never each other); agent/ only core/ and itself; http/
# nothing of ours (an HTTP/1.1 transport); server/ (the controller service) the layers below it,
# never http/, northbound/, lab/ or cli/; northbound/ (the REST adapter) core/, http/ and the
# service contract of server/ (services.h and the value types it names), never the controller
# itself; lab/ core/, southbound/, http/ and the REST client, never server/; cli/ anything.
# Tests and benchmarks may include everything. Prints every violation as
# FILE:LINE: #include "X" (LAYER may not include OTHER) and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [core]="core"
  [scheduler]="core scheduler"
  [storage]="core storage"
  [southbound]="core southbound"
  [agent]="core agent"
  [http]="http"
  [server]="core scheduler storage southbound server"
  [northbound]="core http server northbound"
  [lab]="core southbound http northbound lab"
  [cli]="core scheduler storage southbound agent http server northbound lab cli"
)
# Headers of an allowed layer that a layer still may not include.
declare -A forbidden=(
  # The REST adapter sees the service interfaces (server/services.h), not their implementation.
  [northbound]="server/controller.h server/cluster_node.h server/switch_fleet.h server/job_manager.h server/topology_manager.h server/batch_refit.h server/retention_worker.h server/worker_pool.h"
  # The lab talks to a controller over REST: the client only, not the adapter.
  [lab]="northbound/http_api.h northbound/rest_json.h northbound/rest_resources.h northbound/rest_router.h northbound/web_assets.h"
)
layers="core scheduler storage southbound agent http server northbound lab cli"
violations=0
files=$(git ls-files 'core/*' 'scheduler/*' 'storage/*' 'southbound/*' 'agent/*' 'http/*' \
          'server/*' 'northbound/*' 'lab/*' 'cli/*' 2>/dev/null ||
        find $layers -type f)
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
    elif [[ " ${forbidden[$layer]:-} " == *" $inc "* ]]; then
      echo "$f:$line: #include \"$inc\" ($layer may not include $inc)"
      violations=$((violations + 1))
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
done
if [ "$violations" -gt 0 ]; then
  echo "layering: $violations include(s) break the layers of docs/architecture.md" >&2
  exit 1
fi
echo "layering: ok"
