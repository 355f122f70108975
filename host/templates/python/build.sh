#!/bin/sh
# Builds app.py with the Weir Python SDK into {{name}}.wasm, with
# componentize-py (pip install componentize-py==0.25.1).
set -eu
cd "$(dirname "$0")"
WEIR=${WEIR:-{{weir}}}
command -v componentize-py >/dev/null || { echo "error: componentize-py not found: pip install componentize-py==0.25.1" >&2; exit 1; }
componentize-py -d "$WEIR/wit" -w operator componentize -p "$WEIR/sdk/python" -p . app -o {{name}}.wasm
