#!/usr/bin/env bash
# Refreshes the xterm.js files the browser page embeds (assets/vendor/) from the npm registry:
# `npm pack` of each package at the version given, then its built ES module, its CSS and its
# LICENSE are copied in as they are, and assets/vendor/VERSIONS records what was taken.
#
#   contrib/refresh-xterm.sh                      # the versions below
#   XTERM=6.0.0 FIT=0.11.0 LINKS=0.12.0 UNICODE11=0.9.0 contrib/refresh-xterm.sh
#
# Then rebuild (the files are compiled into the binary by src/server/page.rs) and run the
# page test (`cargo test --test it page:: -- --ignored`).
set -euo pipefail
cd "$(dirname "$0")/.."

XTERM=${XTERM:-6.0.0}
FIT=${FIT:-0.11.0}
LINKS=${LINKS:-0.12.0}
# The Unicode 11 width table: without it xterm.js counts most emoji as one cell where the
# screen model (and the programs writing them) count two. The version released with XTERM;
# tests/screen-reference/package.json pins the same one for the fidelity harness.
UNICODE11=${UNICODE11:-0.9.0}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Packs one package into $tmp/<dir>/package and prints its integrity line for VERSIONS.
fetch() {
    local spec=$1 dir=$2
    mkdir -p "$tmp/$dir"
    local tgz
    tgz=$(cd "$tmp/$dir" && npm pack --silent "$spec")
    tar -xzf "$tmp/$dir/$tgz" -C "$tmp/$dir"
    local integrity
    integrity=$(npm view "$spec" dist.integrity)
    echo "$spec $integrity"
}

out=assets/vendor
rm -rf "$out"
mkdir -p "$out/xterm" "$out/addon-fit" "$out/addon-web-links" "$out/addon-unicode11"
{
    echo "# Vendored by contrib/refresh-xterm.sh from the npm registry; do not edit by hand."
    fetch "@xterm/xterm@$XTERM" xterm
    fetch "@xterm/addon-fit@$FIT" addon-fit
    fetch "@xterm/addon-web-links@$LINKS" addon-web-links
    fetch "@xterm/addon-unicode11@$UNICODE11" addon-unicode11
} > "$tmp/VERSIONS"

cp "$tmp/xterm/package/lib/xterm.mjs" "$tmp/xterm/package/css/xterm.css" \
    "$tmp/xterm/package/LICENSE" "$out/xterm/"
cp "$tmp/addon-fit/package/lib/addon-fit.mjs" "$tmp/addon-fit/package/LICENSE" "$out/addon-fit/"
cp "$tmp/addon-web-links/package/lib/addon-web-links.mjs" \
    "$tmp/addon-web-links/package/LICENSE" "$out/addon-web-links/"
cp "$tmp/addon-unicode11/package/lib/addon-unicode11.mjs" \
    "$tmp/addon-unicode11/package/LICENSE" "$out/addon-unicode11/"
cp "$tmp/VERSIONS" "$out/VERSIONS"
cat "$out/VERSIONS"
