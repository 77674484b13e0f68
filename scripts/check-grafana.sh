#!/usr/bin/env bash
# Every metric examples/grafana/inac-dashboard.json queries is one server/metrics.cc exports
# (histograms' _bucket/_count/_sum series included), and the file is valid JSON.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dash="$root/examples/grafana/inac-dashboard.json"
python3 -m json.tool "$dash" > /dev/null
exported="$(grep -o 'Name("inac_[a-z_]*")' "$root/server/metrics.cc" | sed 's/Name("\(.*\)")/\1/' | sort -u)"
status=0
for m in $(grep -o 'inac_[a-z_]*' "$dash" | sort -u); do
  base="${m%_bucket}"; base="${base%_count}"; base="${base%_sum}"
  if ! grep -qx "$base" <<< "$exported" && ! grep -qx "$m" <<< "$exported"; then
    echo "check-grafana: $m is not a metric of server/metrics.cc" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "check-grafana: every metric of the dashboard is exported"
exit $status
