# Shared by scripts/demo and scripts/test: make a fresh machine ready.
# Idempotent: every step is skipped when already done.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD

# rust-toolchain.toml pins the toolchain and declares the wasm32-wasip2
# target; make sure both are present even where rustup does not install
# them on first use (RUSTUP_AUTO_INSTALL=0).
TOOLCHAIN=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if ! rustup toolchain list 2>/dev/null | grep -q "^$TOOLCHAIN"; then
    echo "==> installing Rust $TOOLCHAIN" >&2
    rustup toolchain install "$TOOLCHAIN" --profile minimal -c rustfmt -c clippy -t wasm32-wasip2
fi
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "==> installing the wasm32-wasip2 target" >&2
    rustup target add wasm32-wasip2
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
HOST_BIN="$CARGO_TARGET_DIR/release/host"
