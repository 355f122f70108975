#!/bin/sh
# Builds app.c with the Weir C SDK into {{name}}.wasm: clang for wasm32-wasi
# (Debian: apt-get install clang wasi-libc libclang-rt-dev-wasm32) and the
# Rust toolchain's wasm-component-ld (see the SDK's build.sh).
set -eu
cd "$(dirname "$0")"
WEIR=${WEIR:-{{weir}}}
"$WEIR/sdk/c/build.sh" {{name}}.wasm app.c
