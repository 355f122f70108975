//! A stored object read as a stream, checked against what `_metadata`
//! says of it: never more than its stated size is handed on, at its end
//! its size and CRC-32 must match, and an object whose stated size is over
//! the settings' limits is refused before it is opened. Also reading one
//! whole into memory, in a buffer that grows only as bytes arrive.

use super::{CheckpointStorage, StorageError};
use bytes::Bytes;
use std::io::Read;

impl CheckpointStorage {
    /// Reads `relative` whole into memory, checking it has `size` bytes
    /// with CRC-32 `crc32`: refused unread if `size` is over
    /// `state.checkpoints.max_section_size`, and the buffer grows only as
    /// bytes arrive, never past `size`, whatever the store holds.
    pub fn read_object(&self, relative: &str, size: u64, crc32: u32) -> Result<Vec<u8>, StorageError> {
        self.within(relative, size, self.limits.max_section_size, "state.checkpoints.max_section_size")?;
        let reader = self.open_reader(relative, size, crc32)?;
        reader
            .read_to_vec()
            .map_err(|e| StorageError::Corrupt { location: self.location(relative), message: e.to_string() })
    }

    /// Refuses `relative`, which `_metadata` gives `size` bytes, if that is
    /// over `state.checkpoints.max_file_size`: before fetching a set of
    /// files, so that none is fetched in vain.
    pub fn check_file_size(&self, relative: &str, size: u64) -> Result<(), StorageError> {
        self.within(relative, size, self.limits.max_file_size, "state.checkpoints.max_file_size")
    }

    /// Refuses `relative`, which `_metadata` gives `size` bytes, if that
    /// is over `limit`, the value of `setting`.
    fn within(&self, relative: &str, size: u64, limit: u64, setting: &'static str) -> Result<(), StorageError> {
        if size > limit {
            return Err(StorageError::TooLarge { location: self.location(relative), size, limit, setting });
        }
        Ok(())
    }

    /// Opens `relative` for reading as a stream, chunk by chunk, so it is
    /// never in memory whole; at its end the reader checks it had `size`
    /// bytes with CRC-32 `crc32`, and fails the read if not. A file
    /// `_metadata` gives more than `state.checkpoints.max_file_size` is
    /// refused unopened.
    pub fn open_reader(&self, relative: &str, size: u64, crc32: u32) -> Result<ObjectReader<'_>, StorageError> {
        self.check_file_size(relative, size)?;
        let location = self.location(relative);
        // A local file is read directly: object_store's local store streams
        // it in 8 KiB chunks through the runtime's blocking pool, which cost
        // half of a large restore's time.
        let from = match &self.local {
            Some(local) => Source::File(std::io::BufReader::with_capacity(1 << 20, self.open_local(local, relative)?)),
            None => Source::Stream(
                self.runtime
                    .block_on(self.store.get(&self.path(relative)))
                    .map_err(|source| StorageError::Io { op: "reading", location: location.clone(), cause: source })?
                    .into_stream(),
            ),
        };
        Ok(ObjectReader {
            storage: self,
            from,
            chunk: Bytes::new(),
            hasher: crc32fast::Hasher::new(),
            read: 0,
            size,
            crc32,
            location,
        })
    }
}

/// Where an object's bytes come from.
enum Source {
    /// A file of a local directory, read directly.
    File(std::io::BufReader<std::fs::File>),
    /// Any other store, through object_store.
    Stream(futures::stream::BoxStream<'static, object_store::Result<Bytes>>),
}

/// A stored object read as a stream ([`CheckpointStorage::open_reader`]).
pub struct ObjectReader<'a> {
    storage: &'a CheckpointStorage,
    /// Where its bytes come from.
    from: Source,
    chunk: Bytes,
    hasher: crc32fast::Hasher,
    read: u64,
    size: u64,
    crc32: u32,
    location: String,
}

impl std::io::Read for ObjectReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.next_bytes(buf)?;
        if n == 0 {
            let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
            if self.read != self.size {
                return Err(bad(format!("{} bytes, _metadata says {} (truncated?)", self.read, self.size)));
            }
            if self.hasher.clone().finalize() != self.crc32 {
                return Err(bad("checksum mismatch".into()));
            }
            return Ok(0);
        }
        if self.read + n as u64 > self.size {
            // Never hand on more than `_metadata` said the object holds.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("more than the {} bytes _metadata says", self.size),
            ));
        }
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// A whole object's buffer starts growing from this many bytes.
const GROW_FROM: usize = 1 << 20;

impl ObjectReader<'_> {
    /// The whole object, checked. The buffer doubles as bytes arrive and
    /// never grows past the size `_metadata` states: an object shorter
    /// than its claim costs only the bytes it holds.
    pub fn read_to_vec(mut self) -> std::io::Result<Vec<u8>> {
        let size = usize::try_from(self.size)
            .map_err(|_| std::io::Error::other(format!("{} bytes do not fit in memory here", self.size)))?;
        let mut bytes = Vec::new();
        while bytes.len() < size {
            let start = bytes.len();
            let want = (size - start).min(start.max(GROW_FROM));
            bytes.reserve_exact(want);
            bytes.resize(start + want, 0);
            let got = fill(&mut self, &mut bytes[start..])?;
            bytes.truncate(start + got);
            if got < want {
                break;
            }
        }
        // One read more reaches the end, where size and checksum are
        // checked (a short object failed that check inside `fill`).
        match self.read(&mut [0u8; 1])? {
            0 => Ok(bytes),
            _ => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "longer than _metadata says")),
        }
    }

    /// Up to `buf.len()` more bytes of the object into `buf`, unchecked;
    /// 0 at its end.
    fn next_bytes(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use futures::StreamExt;
        let stream = match &mut self.from {
            Source::File(file) => {
                return file
                    .read(buf)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", self.location)));
            }
            Source::Stream(stream) => stream,
        };
        while self.chunk.is_empty() {
            match self.storage.runtime.block_on(stream.next()) {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => return Err(std::io::Error::other(format!("reading {}: {e}", self.location))),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

/// Reads into `buf` until it is full or `r` ends; returns how many bytes.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
