//! Loading operator components: read, check that the file is a component
//! implementing the operator world, compile (or load the compiled artifact
//! from the on-disk cache, keyed by content hash), and pre-link.

use super::bindings::OperatorPre;
use super::host::OperatorHost;
use super::{HANDLER_FUNCTIONS, HANDLER_INTERFACE};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Instant;
use thiserror::Error;
use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker};

/// Why a module cannot run. All but `Cache` are the user's to fix.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WasmError {
    /// The file could not be read.
    #[error("operator '{uid}': cannot read module {path}: {cause}")]
    Read {
        /// Operator uid.
        uid: String,
        /// Module path.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// Not WebAssembly at all.
    #[error("operator '{uid}': module {path} is not a WebAssembly file (no \\0asm header)")]
    NotWasm {
        /// Operator uid.
        uid: String,
        /// Module path.
        path: PathBuf,
    },
    /// A core module where a component is needed.
    #[error(
        "operator '{uid}': module {path} is a core WebAssembly module, not a component; build it for the wasm32-wasip2 target (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule {
        /// Operator uid.
        uid: String,
        /// Module path.
        path: PathBuf,
    },
    /// wasmtime rejected the component.
    #[error("operator '{uid}': module {path} does not compile: {message}")]
    Compile {
        /// Operator uid.
        uid: String,
        /// Module path.
        path: PathBuf,
        /// wasmtime's reason.
        message: String,
    },
    /// The component does not export the operator interface or some of it.
    #[error("operator '{uid}': module {path} does not implement the operator world: {message}")]
    NotAnOperator {
        /// Operator uid.
        uid: String,
        /// Module path.
        path: PathBuf,
        /// What is missing.
        message: String,
    },
    /// The component imports something the host does not grant.
    #[error("operator '{uid}': module {path} cannot be linked: {message}")]
    Link {
        /// Operator uid.
        uid: String,
        /// Module path.
        path: PathBuf,
        /// wasmtime's reason (names the import).
        message: String,
    },
    /// Instantiation failed (e.g. a start function trapped).
    #[error("operator '{uid}' (subtask {subtask}): cannot instantiate: {message}")]
    Instantiate {
        /// Operator uid.
        uid: String,
        /// Subtask index.
        subtask: u32,
        /// wasmtime's reason.
        message: String,
    },
}

impl crate::fault::Classify for WasmError {
    fn domain(&self) -> crate::fault::Domain {
        crate::fault::Domain::User
    }

    fn retry(&self) -> crate::fault::RetryHint {
        // The same file fails the same way.
        crate::fault::RetryHint::NoRetry
    }
}

/// Whether a load hit the compiled-module cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Compiled now; the cache is disabled.
    Disabled,
    /// Compiled now and stored.
    Miss,
    /// Loaded a stored artifact.
    Hit,
}

/// Loads components for one job, each file once.
pub struct ModuleLoader {
    engine: Engine,
    linker: Linker<OperatorHost>,
    cache_dir: Option<PathBuf>,
    loaded: HashMap<PathBuf, OperatorPre<OperatorHost>>,
}

impl ModuleLoader {
    /// A loader on `engine`, caching compiled artifacts in `cache_dir`.
    pub fn new(engine: &Engine, cache_dir: Option<PathBuf>) -> wasmtime::Result<Self> {
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        super::bindings::Operator::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)?;
        Ok(ModuleLoader { engine: engine.clone(), linker, cache_dir, loaded: HashMap::new() })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads the module at `path` for operator `uid`.
    pub fn load(&mut self, uid: &str, path: &Path) -> Result<OperatorPre<OperatorHost>, WasmError> {
        if let Some(pre) = self.loaded.get(path) {
            return Ok(pre.clone());
        }
        let started = Instant::now();
        let bytes = std::fs::read(path).map_err(|cause| WasmError::Read {
            uid: uid.to_string(),
            path: path.to_path_buf(),
            cause,
        })?;
        check_header(uid, path, &bytes)?;
        let (component, outcome) = self.compile(uid, path, &bytes)?;
        check_exports(&self.engine, uid, path, &component)?;
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| WasmError::Link {
            uid: uid.to_string(),
            path: path.to_path_buf(),
            message: format!("{e:#}"),
        })?;
        let pre = OperatorPre::new(instance_pre).map_err(|e| WasmError::NotAnOperator {
            uid: uid.to_string(),
            path: path.to_path_buf(),
            message: format!("{e:#}"),
        })?;
        tracing::info!(
            operator = uid,
            module = %path.display(),
            cache = ?outcome,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "module loaded"
        );
        self.loaded.insert(path.to_path_buf(), pre.clone());
        Ok(pre)
    }

    fn compile(&self, uid: &str, path: &Path, bytes: &[u8]) -> Result<(Component, CacheOutcome), WasmError> {
        let compile = || {
            Component::new(&self.engine, bytes).map_err(|e| WasmError::Compile {
                uid: uid.to_string(),
                path: path.to_path_buf(),
                message: format!("{e:#}"),
            })
        };
        let Some(dir) = &self.cache_dir else {
            return Ok((compile()?, CacheOutcome::Disabled));
        };
        let artifact = dir.join(format!("{}.cwasm", self.cache_key(bytes)));
        if artifact.is_file() {
            // SAFETY: the file was written by `Component::serialize` of this
            // host into the user's own cache directory, named by the hash of
            // the source bytes and of the engine's compatibility settings;
            // wasmtime re-checks the header and version and fails rather than
            // loading an artifact of another engine.
            match unsafe { Component::deserialize_file(&self.engine, &artifact) } {
                Ok(c) => return Ok((c, CacheOutcome::Hit)),
                Err(e) => tracing::warn!(artifact = %artifact.display(), error = %e, "ignoring unusable cached module"),
            }
        }
        let component = compile()?;
        // The cache is an optimisation: failing to write it only costs the
        // next run a compile.
        match component.serialize() {
            Ok(data) => {
                if let Err(e) = write_atomically(dir, &artifact, &data) {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot write the compiled-module cache");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot serialize compiled module"),
        }
        Ok((component, CacheOutcome::Miss))
    }

    fn cache_key(&self, bytes: &[u8]) -> String {
        let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut engine_hash);
        let mut h = Sha256::new();
        h.update(bytes);
        h.update(engine_hash.finish().to_le_bytes());
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn write_atomically(dir: &Path, target: &Path, data: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, target)
}

/// Distinguishes "not wasm" and "core module" before wasmtime's less direct
/// messages.
fn check_header(uid: &str, path: &Path, bytes: &[u8]) -> Result<(), WasmError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(WasmError::NotWasm { uid: uid.to_string(), path: path.to_path_buf() });
    }
    // Version 1, layer 0 is a core module; components use layer 1.
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(WasmError::CoreModule { uid: uid.to_string(), path: path.to_path_buf() });
    }
    Ok(())
}

/// Checks that the component exports `weir:operator/handler` with every
/// function, naming what is missing.
fn check_exports(engine: &Engine, uid: &str, path: &Path, component: &Component) -> Result<(), WasmError> {
    let ty = component.component_type();
    let exports: Vec<(String, ComponentItem)> = ty.exports(engine).map(|(n, i)| (n.to_string(), i.ty)).collect();
    let not_operator =
        |message: String| WasmError::NotAnOperator { uid: uid.to_string(), path: path.to_path_buf(), message };
    let Some((_, item)) = exports.iter().find(|(n, _)| n == HANDLER_INTERFACE) else {
        let names: Vec<&str> = exports.iter().map(|(n, _)| n.as_str()).collect();
        let hint = if names.iter().any(|n| n.starts_with("weir:operator/handler@")) {
            " (it was built against another version of the weir:operator WIT)"
        } else {
            ""
        };
        return Err(not_operator(format!(
            "it does not export {HANDLER_INTERFACE}{hint}; its exports: [{}]",
            names.join(", ")
        )));
    };
    let ComponentItem::ComponentInstance(instance) = item else {
        return Err(not_operator(format!("its export {HANDLER_INTERFACE} is not an interface")));
    };
    let have: Vec<String> = instance.exports(engine).map(|(n, _)| n.to_string()).collect();
    let missing: Vec<&str> = HANDLER_FUNCTIONS.iter().copied().filter(|f| !have.iter().any(|h| h == f)).collect();
    if !missing.is_empty() {
        return Err(not_operator(format!(
            "{HANDLER_INTERFACE} lacks export(s) {}",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(())
}
