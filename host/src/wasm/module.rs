//! Loading operator components: read (a bounded regular file), check that it
//! is a component implementing the operator world, compile (or take the
//! compiled artifact from the on-disk cache, [`super::cache`]), and
//! pre-link.

use super::bindings::OperatorPre;
use super::cache::ModuleCache;
use super::host::OperatorHost;
use super::{HANDLER_FUNCTIONS, HANDLER_INTERFACE};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
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

/// The largest module file read.
pub const MAX_MODULE_BYTES: u64 = 512 << 20;

/// Compiles modules: the engine, the linker with the host side of the
/// contract, and the on-disk cache. Cheap to clone, and usable on any
/// thread (a live swap compiles off the coordinator's thread).
#[derive(Clone)]
pub struct ModuleCompiler {
    engine: Engine,
    linker: Linker<OperatorHost>,
    cache: Option<ModuleCache>,
}

/// A module read from disk, compiled and pre-linked, with where it was
/// read from and the SHA-256 of its bytes.
#[derive(Clone)]
pub struct Loaded {
    /// Ready to instantiate once per subtask.
    pub module: OperatorPre<OperatorHost>,
    /// The file it was read from.
    pub path: PathBuf,
    /// SHA-256 of the component's bytes, hex.
    pub sha256: String,
}

impl ModuleCompiler {
    /// A compiler on `engine`, caching compiled artifacts in `cache_dir`
    /// when that directory can be trusted.
    pub fn new(engine: &Engine, cache_dir: Option<PathBuf>) -> wasmtime::Result<Self> {
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        super::host::clocks::add_to_linker(&mut linker)?;
        super::bindings::Operator::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)?;
        Ok(ModuleCompiler { engine: engine.clone(), linker, cache: cache_dir.and_then(ModuleCache::open) })
    }

    /// Reads the module at `path` for operator `uid`: a regular file of at
    /// most [`MAX_MODULE_BYTES`] (a named pipe or a device is refused before
    /// it can block). Returns its bytes and their SHA-256.
    pub fn read(&self, uid: &str, path: &Path) -> Result<(Vec<u8>, String), WasmError> {
        use std::io::Read;
        let read_error = |cause| WasmError::Read { uid: uid.to_string(), path: path.to_path_buf(), cause };
        let meta = std::fs::metadata(path).map_err(read_error)?;
        if !meta.is_file() {
            return Err(read_error(std::io::Error::other("not a regular file")));
        }
        // Sized once: growing the buffer copies the module several times.
        let mut bytes = Vec::with_capacity(meta.len().min(MAX_MODULE_BYTES + 1) as usize);
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_MODULE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(read_error)?;
        if bytes.len() as u64 > MAX_MODULE_BYTES {
            return Err(read_error(std::io::Error::other(format!("larger than {MAX_MODULE_BYTES} bytes"))));
        }
        let sha256 = hex::encode(Sha256::digest(&bytes));
        Ok((bytes, sha256))
    }

    /// Reads, checks, compiles (or takes from the cache) and pre-links the
    /// module at `path` for operator `uid`.
    pub fn load(&self, uid: &str, path: &Path) -> Result<Loaded, WasmError> {
        let (bytes, sha256) = self.read(uid, path)?;
        self.compile(uid, path, &bytes, sha256)
    }

    /// Checks, compiles (or takes from the cache) and pre-links `bytes` for
    /// operator `uid`, read from `path` (which messages name).
    pub fn load_bytes(&self, uid: &str, path: &Path, bytes: &[u8]) -> Result<Loaded, WasmError> {
        self.compile(uid, path, bytes, hex::encode(Sha256::digest(bytes)))
    }

    fn compile(&self, uid: &str, path: &Path, bytes: &[u8], sha256: String) -> Result<Loaded, WasmError> {
        let started = Instant::now();
        check_header(uid, path, bytes)?;
        let cached = self.cache.as_ref().and_then(|c| c.get(&self.engine, &sha256));
        let outcome = match (&self.cache, &cached) {
            (None, _) => CacheOutcome::Disabled,
            (Some(_), Some(_)) => CacheOutcome::Hit,
            (Some(_), None) => CacheOutcome::Miss,
        };
        let component = match cached {
            Some(c) => c,
            None => {
                let c = Component::new(&self.engine, bytes).map_err(|e| WasmError::Compile {
                    uid: uid.to_string(),
                    path: path.to_path_buf(),
                    message: format!("{e:#}"),
                })?;
                if let Some(cache) = &self.cache {
                    cache.put(&self.engine, &sha256, &c);
                }
                c
            }
        };
        check_exports(&self.engine, uid, path, &component)?;
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| WasmError::Link {
            uid: uid.to_string(),
            path: path.to_path_buf(),
            message: format!("{e:#}"),
        })?;
        let module = OperatorPre::new(instance_pre).map_err(|e| WasmError::NotAnOperator {
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
        Ok(Loaded { module, path: path.to_path_buf(), sha256 })
    }
}

/// Loads the modules of one job: each distinct content compiled once,
/// however many operators or swaps name it, and a file whose content
/// changed loaded anew (modules are known by their bytes' hash, not their
/// path).
pub struct ModuleLoader {
    compiler: ModuleCompiler,
    /// By SHA-256.
    loaded: HashMap<String, OperatorPre<OperatorHost>>,
}

impl ModuleLoader {
    /// A loader on `engine`, caching compiled artifacts in `cache_dir`.
    pub fn new(engine: &Engine, cache_dir: Option<PathBuf>) -> wasmtime::Result<Self> {
        Ok(ModuleLoader { compiler: ModuleCompiler::new(engine, cache_dir)?, loaded: HashMap::new() })
    }

    /// The compiler, to load a module on another thread.
    pub fn compiler(&self) -> ModuleCompiler {
        self.compiler.clone()
    }

    /// Loads the module at `path` for operator `uid`.
    pub fn load(&mut self, uid: &str, path: &Path) -> Result<Loaded, WasmError> {
        let (bytes, sha256) = self.compiler.read(uid, path)?;
        self.load_hashed(uid, path, &bytes, sha256)
    }

    /// Loads `bytes`, read from `path` (which messages name), for operator
    /// `uid`.
    pub fn load_bytes(&mut self, uid: &str, path: &Path, bytes: &[u8]) -> Result<Loaded, WasmError> {
        self.load_hashed(uid, path, bytes, hex::encode(Sha256::digest(bytes)))
    }

    fn load_hashed(&mut self, uid: &str, path: &Path, bytes: &[u8], sha256: String) -> Result<Loaded, WasmError> {
        if let Some(pre) = self.loaded.get(&sha256) {
            return Ok(Loaded { module: pre.clone(), path: path.to_path_buf(), sha256 });
        }
        let loaded = self.compiler.compile(uid, path, bytes, sha256)?;
        self.loaded.insert(loaded.sha256.clone(), loaded.module.clone());
        Ok(loaded)
    }
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
        let hint = match names.iter().find_map(|n| n.strip_prefix("weir:operator/handler@")) {
            Some(version) => format!(
                " (it was built against version {version} of the weir:operator contract, this host runs {}: \
                 rebuild it with this Weir's SDK)",
                super::CONTRACT_VERSION
            ),
            None => String::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn compiler() -> ModuleCompiler {
        ModuleCompiler::new(&crate::wasm::engine::new_engine().unwrap(), None).unwrap()
    }

    #[test]
    fn only_a_regular_file_is_read_so_nothing_can_block_the_reader() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("m.wasm");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        // Nobody writes the pipe: a read would block for ever.
        let err = compiler().read("op", &fifo).unwrap_err().to_string();
        assert!(err.contains("operator 'op'") && err.contains("not a regular file"), "{err}");
        let err = compiler().read("op", tmp.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_module_is_known_by_its_bytes_not_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m.wasm");
        std::fs::write(&path, b"version one").unwrap();
        let (_, first) = compiler().read("op", &path).unwrap();
        std::fs::write(&path, b"version two").unwrap();
        let (bytes, second) = compiler().read("op", &path).unwrap();
        assert_eq!(bytes, b"version two");
        assert_ne!(first, second);
        assert_eq!(second, hex::encode(Sha256::digest(b"version two")));
    }
}
