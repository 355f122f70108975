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

# The rocksdb crate generates its bindings with libclang, and a fresh machine
# has neither clang nor libclang. Only builds with RocksDB need them (the
# demo builds without).
ensure_clang() {
    if ! command -v clang >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then
        echo "==> installing clang and libclang-dev (needed to build RocksDB's bindings)" >&2
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang libclang-dev >/dev/null
    fi
}

# strace, which the durability tests read the host's fsyncs and renames
# with.
ensure_strace() {
    if ! command -v strace >/dev/null 2>&1; then
        echo "==> installing strace (the durability tests trace the host's fsyncs)" >&2
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq strace >/dev/null
    fi
}

# script (util-linux), which the progress test runs the host under to give
# it a terminal.
ensure_script() {
    if ! command -v script >/dev/null 2>&1; then
        echo "==> installing bsdutils (script: the progress test needs a terminal)" >&2
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq bsdutils >/dev/null
    fi
}

# Chromium (Debian's package), which the dashboard test drives headless.
ensure_chromium() {
    if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/lib/chromium/chromium ]; then
        echo "==> installing chromium (the dashboard test drives it headless)" >&2
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
    fi
}

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
HOST_BIN="$CARGO_TARGET_DIR/release/host"

# The S3-compatible server the checkpoint tests run against (moto, from
# PyPI), in its own virtualenv; installed once.
ensure_moto() {
    local venv="${XDG_CACHE_HOME:-$HOME/.cache}/weir/venv"
    if [ ! -x "$venv/bin/moto_server" ]; then
        echo "==> installing moto_server (S3-compatible test server) into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet 'moto[server]==5.1.22'
    fi
    export WEIR_MOTO_SERVER="$venv/bin/moto_server"
}

# Java and Maven, from Debian's packages where missing: the Kafka test
# broker runs on the JVM and its jars come from Maven Central.
ensure_java() {
    if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
        echo "==> installing Java 17 and Maven (the Kafka test broker)" >&2
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
    fi
}

# Apache Kafka (pinned; tests/kafka-broker/pom.xml), the broker the Kafka
# and cluster tests and benchmarks start on loopback, each its own KRaft
# single node (tests/src/kafka.rs): its jars and their dependencies, from
# Maven Central, copied once into ~/.cache/weir/kafka/<version>/libs.
# Exports WEIR_KAFKA_LIBS, which the launcher reads.
KAFKA_VERSION=4.1.1
ensure_kafka() {
    local root="${XDG_CACHE_HOME:-$HOME/.cache}/weir/kafka/$KAFKA_VERSION"
    if [ ! -f "$root/complete" ]; then
        ensure_java
        echo "==> installing Apache Kafka $KAFKA_VERSION (test broker) from Maven Central into $root" >&2
        rm -rf "$root"
        mvn -q -B -Dstyle.color=never -f "$REPO/tests/kafka-broker/pom.xml" dependency:copy-dependencies \
            -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime -DoutputDirectory="$root/libs"
        cp "$REPO/tests/kafka-broker/log4j2.properties" "$root/"
        touch "$root/complete"
    fi
    export WEIR_KAFKA_LIBS="$root/libs"
}

# pytest (PyPI, pinned), which runs the Python SDK's unit tests, in the
# same virtualenv; installed once.
ensure_pytest() {
    local venv="${XDG_CACHE_HOME:-$HOME/.cache}/weir/venv"
    if [ ! -x "$venv/bin/pytest" ]; then
        echo "==> installing pytest (the Python SDK's unit tests) into $venv" >&2
        [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet 'pytest==8.3.5'
    fi
    export WEIR_PYTHON="$venv/bin/python"
}

# componentize-py (PyPI, pinned) builds Python operators into components.
ensure_componentize_py() {
    local venv="${XDG_CACHE_HOME:-$HOME/.cache}/weir/venv"
    if [ ! -x "$venv/bin/componentize-py" ]; then
        echo "==> installing componentize-py (Python operators) into $venv" >&2
        [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet 'componentize-py==0.25.1'
    fi
    export WEIR_COMPONENTIZE_PY="$venv/bin/componentize-py"
}

# Builds every Python operator, guest-examples/<example>-py/<operator>/app.py,
# with the Python SDK (the package sdk/python/weir) into
# target/wasm/<example>_<operator>.wasm (dashes as underscores).
build_python_guests() {
    ensure_componentize_py
    build_script_guests py sdk/python componentize_py
}

# mypy (PyPI, pinned), which type-checks the Python SDK and operators, in
# the same virtualenv; installed once.
ensure_mypy() {
    local venv="${XDG_CACHE_HOME:-$HOME/.cache}/weir/venv"
    if [ ! -x "$venv/bin/mypy" ]; then
        echo "==> installing mypy (the Python SDK's type check) into $venv" >&2
        [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet 'mypy==2.4.1'
    fi
    export WEIR_MYPY="$venv/bin/mypy"
}

# mypy --strict over the Python SDK and every Python operator, against the
# bindings componentize-py generates from the WIT (so a call the host does
# not offer, or with the wrong types, is an error). Operators are checked
# one by one: each is a module named `app`.
check_python_types() {
    ensure_componentize_py
    ensure_mypy
    local bindings="$CARGO_TARGET_DIR/python-bindings" app
    rm -rf "$bindings"
    "$WEIR_COMPONENTIZE_PY" -d wit -w operator bindings "$bindings" >/dev/null
    local mypy=("$WEIR_MYPY" --config-file sdk/python/pyproject.toml --cache-dir "$CARGO_TARGET_DIR/mypy-cache")
    MYPYPATH="$bindings" "${mypy[@]}" sdk/python/weir
    for app in guest-examples/*-py/*/app.py tests/benches/python_profile/*/app.py host/templates/python/app.py; do
        MYPYPATH="$bindings:sdk/python" "${mypy[@]}" "$app"
    done
}

# `pip install ./sdk/python` into a fresh virtualenv, then componentize-py
# builds an operator from the installed package alone (without
# `-p sdk/python`): the package is complete and installable.
check_python_package() {
    ensure_componentize_py
    local tmp
    tmp="$(mktemp -d)"
    python3 -m venv "$tmp/venv"
    "$tmp/venv/bin/pip" install --quiet ./sdk/python
    local site
    site="$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    [ -f "$site/weir/py.typed" ] || { echo "error: the installed package has no weir/py.typed" >&2; exit 1; }
    "$WEIR_COMPONENTIZE_PY" -d wit -w operator componentize -p "$site" -p guest-examples/word-count-py/counter app \
        -o "$tmp/counter.wasm" >/dev/null
    rm -rf "$tmp"
}

componentize_py() { # app dir, output
    "$WEIR_COMPONENTIZE_PY" -d wit -w operator componentize -p sdk/python -p "$1" app -o "$2"
}

# componentize-qjs and componentize-js (npm, pinned) build JavaScript operators
# into components, on QuickJS and on SpiderMonkey.
ensure_componentize_js() {
    local prefix="${XDG_CACHE_HOME:-$HOME/.cache}/weir/node"
    local entry="$prefix/node_modules/@bytecodealliance/componentize-js/src/componentize.js"
    local qjs="$prefix/node_modules/componentize-qjs"
    if [ ! -f "$entry" ] || [ "$(node -p "require('$qjs/package.json').version" 2>/dev/null)" != "0.4.5" ]; then
        command -v npm >/dev/null || { echo "error: npm (Node.js) is needed to build the JavaScript operators" >&2; exit 1; }
        echo "==> installing componentize-qjs and componentize-js (JavaScript operators) into $prefix" >&2
        mkdir -p "$prefix"
        npm install --silent --no-audit --no-fund --prefix "$prefix" \
            'componentize-qjs@0.4.5' '@bytecodealliance/componentize-js@0.23.0'
    fi
    export WEIR_COMPONENTIZE_JS="$entry"
    export WEIR_COMPONENTIZE_QJS="$qjs/index.js"
}

# TypeScript (npm, pinned) checks the JavaScript SDK's declarations
# (sdk/js/weir.d.ts), beside the engines.
ensure_typescript() {
    local prefix="${XDG_CACHE_HOME:-$HOME/.cache}/weir/node"
    if [ "$("$prefix/node_modules/.bin/tsc" --version 2>/dev/null)" != "Version 7.0.2" ]; then
        command -v npm >/dev/null || { echo "error: npm (Node.js) is needed to check the JavaScript SDK" >&2; exit 1; }
        echo "==> installing typescript (checks the JavaScript SDK's declarations) into $prefix" >&2
        mkdir -p "$prefix"
        npm install --silent --no-audit --no-fund --prefix "$prefix" 'typescript@7.0.2'
    fi
    export WEIR_TSC="$prefix/node_modules/.bin/tsc"
}

# Builds every JavaScript operator, guest-examples/<example>-js/<operator>/app.js,
# with the JavaScript SDK (sdk/js, its weir-build command) into
# target/wasm/<example>_<operator>.wasm, on QuickJS (weir-build's default
# engine). WEIR_JS_ENGINE=spidermonkey builds them on SpiderMonkey instead,
# and WEIR_JS_AOT=1 on SpiderMonkey ahead of time (weir-build --aot, with the
# weval ensure_weval installs): `WEIR_JS_ENGINE=spidermonkey scripts/test` or
# `WEIR_JS_AOT=1 scripts/test` runs every JavaScript test on those builds.
build_js_guests() {
    ensure_componentize_js
    local mode
    mode="$(js_mode)"
    [ "$mode" = aot ] && ensure_weval
    # A build of another mode is not fresh, however new.
    mkdir -p target/wasm
    if [ "$(cat target/wasm/.js-mode 2>/dev/null || echo none)" != "$mode" ]; then
        rm -f target/wasm/*_js_*.wasm
    fi
    echo "$mode" > target/wasm/.js-mode
    build_script_guests js sdk/js componentize_js
    # Word count on SpiderMonkey too, whatever the mode: its job
    # (guest-examples/word-count-js/spidermonkey.toml) keeps that engine
    # tested end to end.
    local op
    for op in tokenizer counter; do
        build_script_guest "guest-examples/word-count-js/$op" "target/wasm/word_count_js_${op}_spidermonkey.wasm" \
            sdk/js componentize_spidermonkey
    done
}

componentize_spidermonkey() { # app dir, output
    node sdk/js/build.mjs "$1/app.js" "$2" --engine spidermonkey
}

# quickjs, spidermonkey or aot, from WEIR_JS_ENGINE and WEIR_JS_AOT.
js_mode() {
    if [ "${WEIR_JS_AOT:-0}" = 1 ]; then
        echo aot
    else
        case "${WEIR_JS_ENGINE:-quickjs}" in
            quickjs | spidermonkey) echo "${WEIR_JS_ENGINE:-quickjs}" ;;
            *) echo "error: WEIR_JS_ENGINE is quickjs or spidermonkey, not '$WEIR_JS_ENGINE'" >&2; exit 1 ;;
        esac
    fi
}

componentize_js() { # app dir, output
    case "$(js_mode)" in
        aot) node sdk/js/build.mjs "$1/app.js" "$2" --aot ;;
        *) node sdk/js/build.mjs "$1/app.js" "$2" --engine "$(js_mode)" ;;
    esac
}

# weval, the partial evaluator componentize-js compiles JavaScript ahead of
# time with (weir-build --aot), built from crates.io (about 10 minutes on 2
# cores) into the cache once; componentize-js would otherwise download it
# from GitHub. Exports WEIR_WEVAL, which weir-build reads.
ensure_weval() {
    local root="${XDG_CACHE_HOME:-$HOME/.cache}/weir/weval"
    if [ "$("$root/bin/weval" --version 2>/dev/null)" != "weval 0.5.0" ]; then
        echo "==> building weval 0.5.0 (JavaScript ahead of time) into $root" >&2
        cargo install --quiet --locked --root "$root" weval@0.5.0
    fi
    export WEIR_WEVAL="$root/bin/weval"
}

# Builds each guest-examples/*-<ext>/<operator>/app.<ext> with command
# <build> (given the operator's directory and the output) into
# target/wasm/<example>_<operator>.wasm (see build_script_guest).
build_script_guests() {
    local ext="$1" sdk="$2" build="$3" app dir op example
    mkdir -p target/wasm
    for app in guest-examples/*-"$ext"/*/app."$ext"; do
        dir="$(dirname "$app")"
        op="$(basename "$dir")"
        example="$(basename "$(dirname "$dir")")"
        build_script_guest "$dir" "target/wasm/${example//-/_}_${op//-/_}.wasm" "$sdk" "$build"
    done
}

# Builds the operator in <dir> with command <build> into <out>, unless
# <out> is newer than the operator's files, the SDK in <sdk> and the WIT.
build_script_guest() {
    local dir="$1" out="$2" sdk="$3" build="$4"
    if [ -f "$out" ] && [ -z "$(find "$dir" "$sdk" wit -newer "$out" -type f -not -path '*/__pycache__/*' | head -1)" ]; then
        return
    fi
    echo "==> $build: $dir -> $out" >&2
    "$build" "$dir" "$out.tmp"
    mv "$out.tmp" "$out"
}

# The C operators' toolchain: Debian's clang, which has the wasm32 target,
# with wasi-libc and the wasm32 compiler-rt builtins. The linker that turns
# the core module into a component (wasm-component-ld, with the WASI
# preview1 adapter built in) comes with the Rust toolchain; see
# sdk/c/build.sh.
ensure_wasi_clang() {
    if ! command -v clang >/dev/null 2>&1 || [ ! -f /usr/lib/wasm32-wasi/libc.a ] \
        || ! ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1; then
        echo "==> installing clang, wasi-libc and the wasm32 builtins (C operators)" >&2
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang wasi-libc libclang-rt-dev-wasm32 >/dev/null
    fi
}

# Builds every C operator, guest-examples/<example>-c/<operator>/app.c, with
# the C SDK (sdk/c) into target/wasm/<example>_<operator>.wasm.
build_c_guests() {
    ensure_wasi_clang
    build_script_guests c sdk/c componentize_c
}

componentize_c() { # app dir, output
    sdk/c/build.sh "$2" "$1/app.c"
}

# wit-bindgen's CLI (crates.io, pinned, its C generator only), which
# scripts/c-bindings regenerates sdk/c/bindings/ with after a WIT change.
# Not needed to build or test: the bindings are committed. About 3 minutes
# to build, once.
ensure_wit_bindgen() {
    local root="${XDG_CACHE_HOME:-$HOME/.cache}/weir/wit-bindgen"
    if [ ! -x "$root/bin/wit-bindgen" ]; then
        echo "==> building wit-bindgen 0.61.1 (C generator) into $root" >&2
        env -u CARGO_TARGET_DIR cargo install --quiet --locked wit-bindgen-cli --version 0.61.1 \
            --no-default-features --features c --root "$root"
    fi
    export WEIR_WIT_BINDGEN="$root/bin/wit-bindgen"
}
