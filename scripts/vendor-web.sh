#!/usr/bin/env bash
# Vendors the dashboard's two libraries from the npm registry into web/vendor/ (docs/dashboard.md):
# Cytoscape.js (the fabric graph) and uPlot (the time-series charts). The files are committed and
# compiled into the binary (northbound/embed_web.cmake), so neither a build nor a running controller
# fetches anything. Run it to upgrade: change a version below, run, review the diff, commit.
# Records name, version, licence, the registry's integrity hash and the sha256 of every copied
# file in web/vendor/VERSIONS.md.
set -euo pipefail

CYTOSCAPE_VERSION=3.34.4
UPLOT_VERSION=1.6.32

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/web/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

command -v npm >/dev/null || { echo "vendor-web: npm is required (scripts/install-deps.sh)" >&2; exit 1; }

# name version "package-path:vendored-name ..."
PACKAGES=(
  "cytoscape $CYTOSCAPE_VERSION dist/cytoscape.min.js:cytoscape.min.js LICENSE:cytoscape.LICENSE"
  "uplot $UPLOT_VERSION dist/uPlot.iife.min.js:uPlot.iife.min.js dist/uPlot.min.css:uPlot.min.css LICENSE:uPlot.LICENSE"
)

mkdir -p "$out"
versions="$work/VERSIONS.md"
{
  echo "# Vendored web libraries"
  echo
  echo "Copied from the npm registry by \`scripts/vendor-web.sh\` (do not edit by hand; change the"
  echo "versions in the script and run it). Served by \`inac serve\` under /ui/vendor/."
  echo
  echo "| package | version | licence | registry integrity |"
  echo "| --- | --- | --- | --- |"
} > "$versions"
files="$work/files.md"
{
  echo
  echo "| file | from | sha256 |"
  echo "| --- | --- | --- |"
} > "$files"

for entry in "${PACKAGES[@]}"; do
  read -r name version mappings <<< "$entry"
  (cd "$work" && npm pack --silent "$name@$version" > /dev/null)
  tarball="$work/$name-$version.tgz"
  license="$(npm view "$name@$version" license 2>/dev/null)"
  integrity="$(npm view "$name@$version" dist.integrity 2>/dev/null)"
  mkdir -p "$work/$name"
  tar -xzf "$tarball" -C "$work/$name"
  echo "| $name | $version | $license | \`$integrity\` |" >> "$versions"
  for m in $mappings; do
    src="${m%%:*}"
    dst="${m##*:}"
    cp "$work/$name/package/$src" "$out/$dst"
    sum="$(sha256sum "$out/$dst" | cut -d' ' -f1)"
    echo "| $dst | $name@$version/$src | \`$sum\` |" >> "$files"
  done
done
cat "$files" >> "$versions"
cp "$versions" "$out/VERSIONS.md"
echo "vendor-web: $(ls "$out" | wc -l) files in $out"
