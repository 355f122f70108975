//! A stored object read as a stream, checked against what `_metadata`
//! says of it: never more than its stated size is handed on, and at its
//! end its size and CRC-32 must match.

use super::CheckpointStorage;
use bytes::Bytes;

/// A stored object read as a stream ([`CheckpointStorage::open_reader`]).
pub struct ObjectReader<'a> {
    pub(super) storage: &'a CheckpointStorage,
    pub(super) stream: futures::stream::BoxStream<'static, object_store::Result<Bytes>>,
    pub(super) chunk: Bytes,
    pub(super) hasher: crc32fast::Hasher,
    pub(super) read: u64,
    pub(super) size: u64,
    pub(super) crc32: u32,
    pub(super) location: String,
}

impl std::io::Read for ObjectReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use futures::StreamExt;
        while self.chunk.is_empty() {
            match self.storage.runtime.block_on(self.stream.next()) {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => return Err(std::io::Error::other(format!("reading {}: {e}", self.location))),
                None => {
                    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
                    if self.read != self.size {
                        return Err(bad(format!("{} bytes, _metadata says {} (truncated?)", self.read, self.size)));
                    }
                    if self.hasher.clone().finalize() != self.crc32 {
                        return Err(bad("checksum mismatch".into()));
                    }
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.chunk.len());
        if self.read + n as u64 > self.size {
            // Never hand on more than `_metadata` said the object holds.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("more than the {} bytes _metadata says", self.size),
            ));
        }
        let part = self.chunk.split_to(n);
        buf[..n].copy_from_slice(&part);
        self.hasher.update(&part);
        self.read += n as u64;
        Ok(n)
    }
}
