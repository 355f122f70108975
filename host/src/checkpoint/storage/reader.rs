//! A stored object read as a stream, checked against what `_metadata`
//! says of it: never more than its stated size is handed on, and at its
//! end its size and CRC-32 must match.

use super::CheckpointStorage;
use bytes::Bytes;
use std::io::Read;

/// Where an object's bytes come from.
pub(super) enum Source {
    /// A file of a local directory, read directly.
    File(std::io::BufReader<std::fs::File>),
    /// Any other store, through object_store.
    Stream(futures::stream::BoxStream<'static, object_store::Result<Bytes>>),
}

/// A stored object read as a stream ([`CheckpointStorage::open_reader`]).
pub struct ObjectReader<'a> {
    pub(super) storage: &'a CheckpointStorage,
    pub(super) source: Source,
    pub(super) chunk: Bytes,
    pub(super) hasher: crc32fast::Hasher,
    pub(super) read: u64,
    pub(super) size: u64,
    pub(super) crc32: u32,
    pub(super) location: String,
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

impl ObjectReader<'_> {
    /// Up to `buf.len()` more bytes of the object into `buf`, unchecked;
    /// 0 at its end.
    fn next_bytes(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use futures::StreamExt;
        let stream = match &mut self.source {
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
