//! Writing one response to a TLS connection. `sendfile` cannot encrypt, so a record set
//! left in its segment files is read (from the page cache) straight into the buffer rustls
//! encrypts from: one copy into user memory, which userspace TLS needs anyway, and none
//! besides. Small in-memory chunks (headers, partition entries) gather in the same buffer,
//! so a response goes out as few full-size TLS records (16 KiB) rather than one record per
//! chunk; large in-memory chunks are handed to rustls directly.
//!
//! Like `sendfile` on the plaintext path, the reads run on the connection's task: the
//! ranges were just found by the fetch and are in the page cache.

use std::io;
use std::os::unix::fs::FileExt;

use brook_protocol::chunked::Chunk;
use brook_storage::FileRecords;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::server::write::{FileChunk, ResponseChunk};

/// The gathering buffer: sixteen full TLS records per write.
const BUFFER: usize = 256 * 1024;

/// A connection's gathering buffer, allocated on its first response and kept (its length
/// stays [`BUFFER`], so reads land in it without zeroing it again each time).
#[derive(Default)]
pub struct Gather {
    buf: Vec<u8>,
    filled: usize,
}

impl Gather {
    fn room(&mut self) -> &mut [u8] {
        if self.buf.len() != BUFFER {
            self.buf = vec![0; BUFFER];
        }
        self.buf.get_mut(self.filled..).unwrap_or_default()
    }

    fn filled(&self) -> &[u8] {
        self.buf.get(..self.filled).unwrap_or_default()
    }

    fn push(&mut self, bytes: &[u8]) {
        let at = self.filled;
        if let Some(room) = self.room().get_mut(..bytes.len()) {
            room.copy_from_slice(bytes);
            self.filled = at + bytes.len();
        }
    }
}

/// Writes the chunks in order and flushes.
pub async fn write_response_tls<W: AsyncWrite + Unpin>(
    stream: &mut W,
    chunks: Vec<ResponseChunk>,
    gather: &mut Gather,
) -> io::Result<()> {
    gather.filled = 0;
    for chunk in chunks {
        match chunk {
            Chunk::Bytes(bytes) if bytes.len() >= BUFFER / 2 => {
                drain(stream, gather).await?;
                stream.write_all(&bytes).await?;
            }
            Chunk::Bytes(bytes) => {
                if gather.filled + bytes.len() > BUFFER {
                    drain(stream, gather).await?;
                }
                gather.push(&bytes);
            }
            Chunk::External(FileChunk(files)) => copy_files(stream, &files, gather).await?,
        }
    }
    drain(stream, gather).await?;
    stream.flush().await
}

async fn drain<W: AsyncWrite + Unpin>(stream: &mut W, gather: &mut Gather) -> io::Result<()> {
    if gather.filled > 0 {
        stream.write_all(gather.filled()).await?;
        gather.filled = 0;
    }
    Ok(())
}

/// Reads the file ranges into the buffer (after what it already holds) and writes it each
/// time it fills. A truncated or short file fails the write, as on the `sendfile` path.
async fn copy_files<W: AsyncWrite + Unpin>(
    stream: &mut W,
    files: &FileRecords,
    gather: &mut Gather,
) -> io::Result<()> {
    for range in files.ranges() {
        let mut position = range.position;
        let end = range.position + range.len;
        while position < end {
            if files.is_stale() {
                return Err(io::Error::other(
                    "records were truncated between the fetch's read and its send",
                ));
            }
            if gather.filled == BUFFER {
                drain(stream, gather).await?;
            }
            let want = usize::try_from(end - position).unwrap_or(usize::MAX);
            let room = gather.room();
            let len = want.min(room.len());
            let read = range
                .file
                .read_at(room.get_mut(..len).unwrap_or_default(), position)?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} ended before its planned range", range.path.display()),
                ));
            }
            gather.filled += read;
            position += read as u64;
        }
    }
    Ok(())
}
