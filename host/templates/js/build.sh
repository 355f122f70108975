#!/bin/sh
# Builds app.js into {{name}}.wasm with weir-build, the command of the Weir
# JavaScript SDK (the npm package @weir/sdk in the Weir checkout, which
# brings componentize-qjs and componentize-js); the first build installs it
# into ./node_modules.
set -eu
cd "$(dirname "$0")"
WEIR=${WEIR:-{{weir}}}
command -v npm >/dev/null || { echo "error: npm (Node.js 20.6 or later) is needed to build a JavaScript operator" >&2; exit 1; }
# --install-links: a copy of the package with its dependencies (a plain
# directory install would only link it).
[ -x node_modules/.bin/weir-build ] || npm install --silent --no-audit --no-fund --install-links "$WEIR/sdk/js"
# The component runs QuickJS. ./build.sh --engine spidermonkey builds on
# SpiderMonkey instead, and ./build.sh --aot compiles ahead of time on it
# (weval, which componentize-js downloads, or the one WEIR_WEVAL names).
npx --no-install weir-build app.js {{name}}.wasm "$@"
