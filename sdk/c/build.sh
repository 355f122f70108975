#!/bin/sh
# Builds a C (or C++) operator into a Weir component: compiles the sources
# with the SDK (weir.c) and the bindings wit-bindgen generated from wit/
# (bindings/) for wasm32-wasi, and links them with wasm-component-ld, which
# turns the core module into a component of the `operator` world and adapts
# its WASI preview1 imports (stdout, stderr) with the adapter it carries.
#
# Usage: sdk/c/build.sh OUT.wasm SOURCE.c... [clang flags]
#
# Needs clang with the wasm32 target and wasi-libc (Debian: clang, wasi-libc,
# libclang-rt-dev-wasm32) and the Rust toolchain, which ships
# wasm-component-ld and the wasm-ld it drives. WEIR_CC overrides clang,
# WEIR_CFLAGS adds flags (default -O2).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 OUT.wasm SOURCE.c... [clang flags]" >&2
    exit 2
fi
out=$1
shift
sdk=$(cd "$(dirname "$0")" && pwd)
cc=${WEIR_CC:-clang}
command -v "$cc" >/dev/null || { echo "error: $cc not found: install clang (Debian: apt-get install clang wasi-libc libclang-rt-dev-wasm32)" >&2; exit 1; }
host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p') || true
bin="$(rustc --print sysroot 2>/dev/null)/lib/rustlib/$host/bin"
if [ -z "$host" ] || [ ! -x "$bin/wasm-component-ld" ]; then
    echo "error: wasm-component-ld not found beside rustc ($bin): it comes with the Rust toolchain (rustup, Rust 1.82 or later)" >&2
    exit 1
fi
# shellcheck disable=SC2086 # WEIR_CFLAGS is a list of flags
exec "$cc" --target=wasm32-wasi -mexec-model=reactor ${WEIR_CFLAGS:--O2} -Wall -Wextra \
    -I "$sdk" "$@" "$sdk/weir.c" "$sdk/bindings/operator.c" "$sdk/bindings/operator_component_type.o" \
    -fuse-ld="$bin/wasm-component-ld" -Wl,--wasm-ld-path="$bin/gcc-ld/wasm-ld" -o "$out"
