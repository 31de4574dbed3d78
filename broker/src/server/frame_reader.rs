//! A connection's request buffers: what it may hold of its client's bytes, and when it
//! needs the broker's request memory pool (`server::memory_pool`). Pure: the connection
//! does the reads and waits for the pool; this says which to do next.
//!
//! - Each connection owns one read buffer of [`OWN_BUFFER`] bytes. Requests that fit in it
//!   (most: metadata, offsets, group calls, fetch requests, small produces) are read there
//!   and cost the pool nothing; bytes read past a request (pipelined requests) stay there.
//! - A larger request takes a lease of its whole size from the pool, and only once the
//!   client has filled the own buffer with its start: a client that announces a large
//!   request and then trickles it (one byte a second) holds its own buffer and no pool
//!   memory. Its body is then read into a buffer of exactly its size, never past it.
//!
//! So a connection holds at most its own buffer, one leased request and the response it is
//! writing; the broker's request bytes are bounded by connections × own buffer + the pool.
//! Kafka leases at the size prefix (`NetworkReceive`); leasing after the own buffer fills
//! keeps trickling clients from draining the pool.

use brook_protocol::frame::frame_size;
use brook_protocol::ProtocolError;
use bytes::buf::Limit;
use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::server::memory_pool::Lease;

/// A connection's own read buffer, in bytes (size prefix included).
pub const OWN_BUFFER: usize = 16 * 1024;

/// What the connection does next.
pub enum Step {
    /// A whole request (without its size prefix), and the pool lease that holds its bytes
    /// (to be kept until it is handled).
    Frame(Bytes, Option<Lease>),
    /// Read more from the client into [`FrameReader::read_target`].
    Read,
    /// A request of this many bytes is larger than the own buffer, and the own buffer is
    /// full of its start: lease its size, then [`FrameReader::start_large`].
    Lease(usize),
}

/// A request larger than the own buffer, being read into its leased buffer.
struct Large {
    buf: BytesMut,
    size: usize,
    lease: Lease,
}

pub struct FrameReader {
    own: BytesMut,
    large: Option<Large>,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            own: BytesMut::with_capacity(OWN_BUFFER),
            large: None,
        }
    }
}

impl FrameReader {
    /// The next step, given `socket.request.max.bytes` (or the pre-authentication limit).
    /// An error (a size out of bounds) closes the connection.
    pub fn next(&mut self, max_size: usize) -> Result<Step, ProtocolError> {
        if let Some(large) = &self.large {
            if large.buf.len() < large.size {
                return Ok(Step::Read);
            }
            let Some(large) = self.large.take() else {
                return Ok(Step::Read);
            };
            return Ok(Step::Frame(large.buf.freeze(), Some(large.lease)));
        }
        let Some(size) = frame_size(&self.own, max_size)? else {
            self.make_room();
            return Ok(Step::Read);
        };
        if self.own.len() >= 4 + size {
            self.own.advance(4);
            return Ok(Step::Frame(self.own.split_to(size).freeze(), None));
        }
        if 4 + size <= OWN_BUFFER || self.own.len() < OWN_BUFFER {
            self.make_room();
            return Ok(Step::Read);
        }
        Ok(Step::Lease(size))
    }

    /// Moves the start of the large request in the own buffer into a buffer of its size,
    /// held by `lease`.
    pub fn start_large(&mut self, size: usize, lease: Lease) {
        let mut buf = BytesMut::with_capacity(size);
        // The own buffer holds only this request's bytes: it is larger than the own buffer.
        buf.extend_from_slice(self.own.get(4..).unwrap_or_default());
        self.own.clear();
        self.large = Some(Large { buf, size, lease });
    }

    /// Where the next read goes, limited so that it never reads past a large request nor
    /// past the own buffer.
    pub fn read_target(&mut self) -> Limit<&mut BytesMut> {
        match &mut self.large {
            Some(large) => {
                let room = large.size.saturating_sub(large.buf.len());
                (&mut large.buf).limit(room)
            }
            None => {
                let room = OWN_BUFFER.saturating_sub(self.own.len());
                (&mut self.own).limit(room)
            }
        }
    }

    /// Bytes read and not yet handed out as a request.
    pub fn buffered(&self) -> usize {
        self.own.len() + self.large.as_ref().map_or(0, |l| l.buf.len())
    }

    /// Room in the own buffer to fill it: a request split off earlier may have taken the
    /// end of its allocation (reclaimed in place once that request is dropped).
    fn make_room(&mut self) {
        let want = OWN_BUFFER.saturating_sub(self.own.len());
        if self.own.capacity() - self.own.len() < want {
            self.own.reserve(want);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::memory_pool::RequestMemoryPool;

    fn frame(body_len: usize, fill: u8) -> Vec<u8> {
        let mut out = (body_len as i32).to_be_bytes().to_vec();
        out.extend(std::iter::repeat_n(fill, body_len));
        out
    }

    /// Feeds `bytes` as the connection would: each read fills at most the read target.
    fn feed(reader: &mut FrameReader, bytes: &mut &[u8]) {
        let mut target = reader.read_target();
        let n = target.remaining_mut().min(bytes.len());
        target.put_slice(&bytes[..n]);
        *bytes = &bytes[n..];
    }

    #[test]
    fn small_requests_are_read_in_the_own_buffer_without_the_pool() {
        let mut reader = FrameReader::default();
        let input = [frame(100, 1), frame(200, 2)].concat();
        let mut rest = input.as_slice();
        assert!(matches!(reader.next(1 << 20), Ok(Step::Read)));
        feed(&mut reader, &mut rest);
        let Ok(Step::Frame(first, None)) = reader.next(1 << 20) else {
            panic!("first frame")
        };
        assert_eq!(first.len(), 100);
        let Ok(Step::Frame(second, None)) = reader.next(1 << 20) else {
            panic!("pipelined frame")
        };
        assert_eq!(&second[..], &[2u8; 200][..]);
        assert!(matches!(reader.next(1 << 20), Ok(Step::Read)));
    }

    #[test]
    fn a_large_request_leases_only_once_the_own_buffer_is_full_and_reads_no_further() {
        let pool = RequestMemoryPool::new(1 << 20);
        let mut reader = FrameReader::default();
        let size = 100_000;
        let input = [frame(size, 7), frame(10, 8)].concat();
        let mut rest = input.as_slice();
        // A trickle: the start of a large request stays in the own buffer.
        let mut first = &rest[..1000];
        feed(&mut reader, &mut first);
        rest = &rest[1000..];
        assert!(matches!(reader.next(1 << 20), Ok(Step::Read)));
        feed(&mut reader, &mut rest);
        assert_eq!(reader.buffered(), OWN_BUFFER);
        let Ok(Step::Lease(wanted)) = reader.next(1 << 20) else {
            panic!("lease")
        };
        assert_eq!(wanted, size);
        reader.start_large(size, pool.try_lease(size).expect("free"));
        assert_eq!(pool.available(), (1 << 20) - size as i64);
        while !matches!(reader.next(1 << 20), Ok(Step::Frame(..))) {
            feed(&mut reader, &mut rest);
        }
        // The next request was not read into the large one's buffer.
        assert_eq!(rest.len(), 14);
        assert_eq!(reader.buffered(), 0);
    }

    #[test]
    fn sizes_out_of_bounds_close_the_connection() {
        let mut reader = FrameReader::default();
        let input = frame(2000, 0);
        let mut rest = input.as_slice();
        feed(&mut reader, &mut rest);
        assert!(matches!(
            reader.next(1000),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
    }
}
