//! Writing one response to its connection: the encoded chunks in order, runs of
//! in-memory chunks with vectored writes (`writev`), and record sets left in their
//! segment files with `sendfile` (issue #13), so their bytes go from the page cache to the
//! socket without being copied through user memory.

use std::collections::VecDeque;
use std::io::{self, IoSlice};

use brook_protocol::chunked::{Chunk, ChunkLen};
use brook_storage::FileRecords;
use bytes::{Buf, Bytes};
use rustix::net::{SendAncillaryBuffer, SendFlags};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::metrics;

/// A record set to send from its files.
#[derive(Debug, Clone)]
pub struct FileChunk(pub FileRecords);

impl ChunkLen for FileChunk {
    fn chunk_len(&self) -> usize {
        usize::try_from(self.0.len()).unwrap_or(usize::MAX)
    }
}

/// One piece of an encoded response.
pub type ResponseChunk = Chunk<FileChunk>;

/// iovecs per `writev`, well under Linux's `IOV_MAX` (1024).
const MAX_IOVECS: usize = 64;

/// Most bytes per `sendfile` call (Linux sends at most 0x7ffff000 per call anyway).
const MAX_SENDFILE: u64 = 1 << 30;

/// Writes the chunks in order.
pub async fn write_response(stream: &mut TcpStream, chunks: Vec<ResponseChunk>) -> io::Result<()> {
    let mut run: Vec<Bytes> = Vec::new();
    for chunk in chunks {
        match chunk {
            Chunk::Bytes(bytes) => run.push(bytes),
            Chunk::External(FileChunk(files)) => {
                write_bytes(stream, std::mem::take(&mut run), More::Follows).await?;
                send_files(stream, &files).await?;
            }
        }
    }
    write_bytes(stream, run, More::Last).await
}

/// Whether more of the response follows a run of in-memory chunks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum More {
    /// A record set follows from its files: the run is sent with `MSG_MORE`, so the
    /// kernel holds its few header bytes and sends them in the record set's first segment
    /// instead of a packet of their own (which would wake the client for a header alone).
    Follows,
    Last,
}

/// Writes in-memory chunks with vectored writes, so record sets read into memory go to the
/// socket without being joined first.
async fn write_bytes(stream: &mut TcpStream, chunks: Vec<Bytes>, more: More) -> io::Result<()> {
    if more == More::Last {
        if let [only] = chunks.as_slice() {
            return stream.write_all(only).await;
        }
    }
    let mut chunks: VecDeque<Bytes> = chunks.into();
    while !chunks.is_empty() {
        let slices: Vec<IoSlice<'_>> = chunks
            .iter()
            .take(MAX_IOVECS)
            .map(|c| IoSlice::new(c))
            .collect();
        let mut written = match more {
            More::Last => stream.write_vectored(&slices).await?,
            More::Follows => send_more(stream, &slices).await?,
        };
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let Some(front) = chunks.front_mut() else {
                break;
            };
            if written >= front.len() {
                written -= front.len();
                chunks.pop_front();
            } else {
                front.advance(written);
                written = 0;
            }
        }
    }
    Ok(())
}

/// One `sendmsg(MSG_MORE)` of `slices`, waiting for the socket to be writable.
async fn send_more(stream: &TcpStream, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    let wanted = slices.iter().map(|s| s.len()).sum();
    send_once(stream, wanted, || {
        let mut control = SendAncillaryBuffer::default();
        rustix::net::sendmsg(stream, slices, &mut control, SendFlags::MORE).map_err(io::Error::from)
    })
    .await
}

/// Waits for the socket to be writable and makes one non-blocking send of up to `wanted`
/// bytes. A short send means the socket's buffer filled, so the readiness is cleared then,
/// as tokio's own `poll_write` does: the next send waits for `EPOLLOUT` instead of first
/// making a call that can only fail with `EAGAIN`. For `sendfile` that call is not free:
/// it reads up to 64 KiB from the page cache into its pipe before finding the socket full,
/// then drops them. (The short send set `SOCK_NOSPACE`, so the socket wakes its poller
/// once space frees.)
async fn send_once(
    stream: &TcpStream,
    wanted: usize,
    mut send: impl FnMut() -> io::Result<usize>,
) -> io::Result<usize> {
    loop {
        stream.writable().await?;
        let mut sent = 0;
        let result = stream.try_io(Interest::WRITABLE, || {
            sent = send()?;
            if sent > 0 && sent < wanted {
                Err(io::ErrorKind::WouldBlock.into()) // clears the readiness
            } else {
                Ok(sent)
            }
        });
        match result {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && sent > 0 => return Ok(sent),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

/// Sends file ranges with `sendfile`, waiting for the socket to be writable between calls.
/// The response's size was fixed when it was encoded, so a range that can no longer be
/// sent as planned (a truncation rewrote the file in place, or the file ended early) fails
/// the write, which closes the connection; the client fetches again. Kafka's
/// `FileRecords.writeTo` does the same on a truncated file.
async fn send_files(stream: &mut TcpStream, files: &FileRecords) -> io::Result<()> {
    for range in files.ranges() {
        let mut position = range.position;
        let end = range.position + range.len;
        while position < end {
            if files.is_stale() {
                return Err(truncated());
            }
            let count = (end - position).min(MAX_SENDFILE) as usize;
            let sent = send_once(stream, count, || {
                let sent =
                    rustix::fs::sendfile(&*stream, &*range.file, Some(&mut position), count)?;
                // A short send is taken for a full socket: the next send waits for it to
                // drain. A truncation also cuts a send short, with no wake-up coming, so
                // it is told apart here (the log marks reads stale before it changes a
                // file in place).
                if sent < count && files.is_stale() {
                    return Err(truncated());
                }
                Ok(sent)
            })
            .await?; // `sendfile` advanced `position`
            if sent == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} ended before its planned range", range.path.display()),
                ));
            }
            metrics::record_fetch_zero_copy_bytes(sent);
        }
    }
    Ok(())
}

/// The error that closes a connection whose planned record set was truncated under it.
fn truncated() -> io::Error {
    io::Error::other("records were truncated between the fetch's read and its send")
}
