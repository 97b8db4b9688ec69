#!/usr/bin/env bash
# Rebuilds worker/api/pages/static/vendor/ from the npm registry: uPlot, which draws the player page's charts.
#   bash worker/api/pages/vendor-uplot.sh
# uPlot publishes its built files in its npm package (dist/): nothing is compiled, they are copied as
# published, with their licence (MIT), and committed, so that installing rating-worker needs no build step
# and no Node. To upgrade: change VERSION and SHA256 (of the package file `npm pack` fetches), run this,
# look at the pages (tests/integration/test_pages.py), commit what changed.
set -euo pipefail
VERSION=1.6.32
SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d
vendor="$(cd "$(dirname "$0")" && pwd)/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$VERSION" >/dev/null)
echo "$SHA256  $work/uplot-$VERSION.tgz" | sha256sum --check --quiet -
tar -xzf "$work/uplot-$VERSION.tgz" -C "$work"
cp "$work/package/dist/uPlot.iife.min.js" "$work/package/dist/uPlot.min.css" "$vendor/"
cp "$work/package/LICENSE" "$vendor/uPlot.LICENSE"
echo "uPlot $VERSION copied into $vendor"
