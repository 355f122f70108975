#!/bin/sh
# Builds app.js with the Weir JavaScript SDK into {{name}}.wasm, with
# componentize-js (npm install @bytecodealliance/componentize-js@0.23.0;
# WEIR_COMPONENTIZE_JS names its src/componentize.js).
set -eu
cd "$(dirname "$0")"
WEIR=${WEIR:-{{weir}}}
[ -n "${WEIR_COMPONENTIZE_JS:-}" ] || { echo "error: set WEIR_COMPONENTIZE_JS to componentize-js's src/componentize.js" >&2; exit 1; }
node "$WEIR/sdk/js/build.mjs" app.js {{name}}.wasm
