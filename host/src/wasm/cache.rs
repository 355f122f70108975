//! The on-disk cache of compiled modules. A cached artifact is native code
//! the host runs, so the cache is trusted only as far as its directory is:
//! the directory must belong to the user running the host and be writable
//! by nobody else (as ssh treats its keys), and it comes from the host
//! settings only, never from a job file. Each artifact is written
//! atomically beside a record of the component's SHA-256, the engine's
//! compatibility hash and the artifact's CRC-32; it is loaded only when all
//! three match, from bytes read and checked in memory (so the file cannot
//! change between the check and the load). The CRC-32 catches a damaged or
//! swapped file; it is no defence against a writer, who could rewrite the
//! record as well (a cryptographic hash would not be either), which is why
//! the directory is what is trusted. It is a checksum, not SHA-256, because
//! artifacts are large (55 MB for a JavaScript operator) and hashing them
//! was about a fifth of a cached start.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The largest artifact read back.
const MAX_ARTIFACT: u64 = 1 << 30;

/// A compiled-module cache in a directory this user alone can write.
#[derive(Debug, Clone)]
pub struct ModuleCache {
    dir: PathBuf,
}

/// What is recorded beside an artifact.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    component_sha256: String,
    engine_hash: String,
    artifact_crc32: u32,
}

impl ModuleCache {
    /// The cache in `dir`, created (mode 0700) if missing; `None`, with a
    /// warning, if the directory cannot be trusted or used.
    pub fn open(dir: PathBuf) -> Option<Self> {
        if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot create the compiled-module cache; compiling every run");
            return None;
        }
        match untrusted(&dir) {
            None => Some(ModuleCache { dir }),
            Some(why) => {
                tracing::warn!(dir = %dir.display(), "compiled-module cache disabled: {why}");
                None
            }
        }
    }

    /// The cached compilation of `component_sha256` on `engine`, if a
    /// sound one is there.
    pub fn get(&self, engine: &Engine, component_sha256: &str) -> Option<Component> {
        let key = key(engine, component_sha256);
        let record: Record =
            std::fs::read(self.dir.join(format!("{key}.json"))).ok().and_then(|b| serde_json::from_slice(&b).ok())?;
        let artifact = self.dir.join(format!("{key}.cwasm"));
        let bytes = read_capped(&artifact)?;
        let expected = Record {
            component_sha256: component_sha256.to_string(),
            engine_hash: engine_hash(engine),
            artifact_crc32: crc32fast::hash(&bytes),
        };
        if record != expected {
            tracing::warn!(artifact = %artifact.display(), "ignoring a cached module that does not match its record");
            return None;
        }
        // SAFETY: `deserialize` runs native code from these bytes. They were
        // read, whole, from a directory only this user can write (checked
        // when the cache was opened), and match the checksum recorded when
        // this host wrote them with `Component::serialize` for this
        // component and this engine's compatibility hash; wasmtime checks
        // the header and version again and fails rather than load an
        // artifact of another engine.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(artifact = %artifact.display(), error = %e, "ignoring an unusable cached module");
                None
            }
        }
    }

    /// Stores the compilation of `component_sha256`. A failure only costs
    /// the next run a compile, so it is a warning.
    pub fn put(&self, engine: &Engine, component_sha256: &str, component: &Component) {
        let key = key(engine, component_sha256);
        let stored = component.serialize().map_err(|e| e.to_string()).and_then(|data| {
            let record = Record {
                component_sha256: component_sha256.to_string(),
                engine_hash: engine_hash(engine),
                artifact_crc32: crc32fast::hash(&data),
            };
            write_atomically(&self.dir, &format!("{key}.cwasm"), &data)
                .and_then(|()| {
                    let json = serde_json::to_vec(&record).expect("a record serializes");
                    write_atomically(&self.dir, &format!("{key}.json"), &json)
                })
                .map_err(|e| e.to_string())
        });
        if let Err(e) = stored {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the compiled-module cache");
        }
    }
}

/// Why `dir` cannot hold native code this host will run, if it cannot.
fn untrusted(dir: &Path) -> Option<String> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    if !meta.is_dir() {
        return Some("it is not a directory (a symbolic link is not followed)".into());
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Some(format!("it belongs to user {}, not to the user running the host ({me})", meta.uid()));
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return Some(format!("it is writable by others (mode {:o}): chmod go-w it", mode & 0o777));
    }
    None
}

/// The cache key: the component's hash, the engine's compatibility hash
/// and the host's version.
fn key(engine: &Engine, component_sha256: &str) -> String {
    let mut h = Sha256::new();
    h.update(component_sha256.as_bytes());
    h.update(engine_hash(engine).as_bytes());
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    hex::encode(h.finalize())
}

fn engine_hash(engine: &Engine) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn read_capped(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    // Sized once: growing the buffer copies the artifact several times.
    let mut bytes = Vec::with_capacity(file.metadata().ok()?.len().min(MAX_ARTIFACT + 1) as usize);
    file.take(MAX_ARTIFACT + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= MAX_ARTIFACT).then_some(bytes)
}

/// Writes `name` in `dir` through a temporary file and a rename, so a
/// reader sees the old file or the new one whole.
fn write_atomically(dir: &Path, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, data)?;
    tmp.as_file().sync_all()?;
    tmp.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_others_can_write_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        assert!(ModuleCache::open(dir.clone()).is_some(), "a new private directory is trusted");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(untrusted(&dir).unwrap().contains("writable by others"));
        assert!(ModuleCache::open(dir.clone()).is_none());
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        assert!(untrusted(&link).unwrap().contains("not a directory"));
    }

    /// An empty component, and one holding an empty core module: two
    /// components that compile to different artifacts.
    const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";
    const OTHER: &[u8] = b"\0asm\x0d\0\x01\0\x01\x08\0asm\x01\0\0\0";

    #[test]
    fn an_artifact_that_does_not_match_its_record_is_never_loaded() {
        let engine = crate::wasm::engine::new_engine().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let cache = ModuleCache::open(tmp.path().join("cache")).unwrap();
        let (empty, other) = (hex::encode(Sha256::digest(EMPTY)), hex::encode(Sha256::digest(OTHER)));
        cache.put(&engine, &empty, &Component::new(&engine, EMPTY).unwrap());
        cache.put(&engine, &other, &Component::new(&engine, OTHER).unwrap());
        assert!(cache.get(&engine, &empty).is_some(), "a sound artifact loads");
        let artifact = |sha: &str| cache.dir.join(format!("{}.cwasm", key(&engine, sha)));
        let good = std::fs::read(artifact(&empty)).unwrap();

        // Altered: one byte flipped.
        let mut altered = good.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        std::fs::write(artifact(&empty), &altered).unwrap();
        assert!(cache.get(&engine, &empty).is_none(), "an altered artifact");
        // Truncated.
        std::fs::write(artifact(&empty), &good[..good.len() / 2]).unwrap();
        assert!(cache.get(&engine, &empty).is_none(), "a truncated artifact");
        // Swapped for another component's sound artifact.
        std::fs::copy(artifact(&other), artifact(&empty)).unwrap();
        assert!(cache.get(&engine, &empty).is_none(), "another component's artifact");
        // Put back: loads again.
        std::fs::write(artifact(&empty), &good).unwrap();
        assert!(cache.get(&engine, &empty).is_some());
        // A component never stored is a miss, whatever lies in the directory.
        assert!(cache.get(&engine, &"0".repeat(64)).is_none());
    }
}
