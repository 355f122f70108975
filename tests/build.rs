//! Builds every guest in `guest-examples/` for `wasm32-wasip2` (release),
//! copies each component to `target/wasm/<crate>.wasm` at the repository
//! root (where the example jobs name them), and generates one constant per
//! component for the tests. Cargo reruns this only when a guest, the SDK or
//! the WIT changed, and the inner cargo rebuilds only what changed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let guests = root.join("guest-examples");
    let members = members(&guests.join("Cargo.toml"));

    for p in ["guest-examples/Cargo.toml", "guest-examples/Cargo.lock", "sdk/Cargo.toml", "sdk/src", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    for m in &members {
        println!("cargo:rerun-if-changed={}", guests.join(m).join("Cargo.toml").display());
        println!("cargo:rerun-if-changed={}", guests.join(m).join("src").display());
    }
    println!("cargo:rerun-if-env-changed=WEIR_GUEST_TARGET_DIR");

    // Guests get their own target directory: the outer cargo holds the lock
    // on ours. Under a persistent CARGO_TARGET_DIR (CI) they share its cache.
    let target_dir = std::env::var_os("WEIR_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("guests")))
        .unwrap_or_else(|| root.join("target").join("guests"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&guests).args(["build", "--release", "--target", "wasm32-wasip2", "--target-dir"]).arg(&target_dir);
    // Nothing of the outer build may leak into the guest build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("run cargo to build the guest examples");
    if !status.success() {
        panic!(
            "building the guest examples failed (see the output above); is the wasm32-wasip2 target installed? (`rustup target add wasm32-wasip2`)"
        );
    }

    let built = target_dir.join("wasm32-wasip2").join("release");
    let out_wasm = root.join("target").join("wasm");
    std::fs::create_dir_all(&out_wasm).unwrap();
    let mut consts = String::new();
    for m in &members {
        let name = crate_name(&guests.join(m).join("Cargo.toml")).replace('-', "_");
        let from = built.join(format!("{name}.wasm"));
        let to = out_wasm.join(format!("{name}.wasm"));
        copy_if_changed(&from, &to);
        consts.push_str(&format!(
            "/// The `{m}` guest component.\npub const {}: &str = {:?};\n",
            name.to_uppercase(),
            to.display().to_string()
        ));
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("artifacts.rs");
    std::fs::write(out, consts).unwrap();
}

/// The `members` list of the guest workspace.
fn members(manifest: &Path) -> Vec<String> {
    let list = manifest_value(manifest, &["workspace", "members"]);
    let list = list.as_array().unwrap_or_else(|| panic!("{}: workspace.members is not a list", manifest.display()));
    list.iter()
        .map(|m| m.as_str().unwrap_or_else(|| panic!("{}: a member is not a string", manifest.display())).to_string())
        .collect()
}

/// The package name a guest's manifest gives.
fn crate_name(manifest: &Path) -> String {
    let name = manifest_value(manifest, &["package", "name"]);
    name.as_str().unwrap_or_else(|| panic!("{}: package.name is not a string", manifest.display())).to_string()
}

/// The value at `keys` in the TOML file `manifest`.
fn manifest_value(manifest: &Path, keys: &[&str]) -> toml::Value {
    let text = std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    for key in keys {
        value =
            value.get(key).cloned().unwrap_or_else(|| panic!("{}: no {} in it", manifest.display(), keys.join(".")));
    }
    value
}

/// Copies only when the bytes differ, so unchanged guests keep their mtime
/// (and the host's compiled-module cache key stays the same either way).
fn copy_if_changed(from: &Path, to: &Path) {
    let new = std::fs::read(from).unwrap_or_else(|e| panic!("guest build produced no {}: {e}", from.display()));
    if std::fs::read(to).ok().as_deref() != Some(&new[..]) {
        std::fs::write(to, new).unwrap();
    }
}
