//! An encoding buffer that does not copy a fetch response's record sets (issue #13).
//!
//! The `kafka-protocol` encoders write a `Bytes` field with one `put_slice` of the whole
//! value. `ChunkedBuf` recognises a slice that *is* one of the record sets it was given
//! (same address, same length) and keeps a reference to it instead of copying it: the
//! encoded response becomes a list of chunks (the encoded fields between record sets,
//! and the record sets themselves) that the connection writes with vectored writes. A
//! record set then goes from the read buffer to the socket with no copy in between.

#![allow(unsafe_code)] // `BufMut` is an unsafe trait; every method delegates to `BytesMut`.

use std::collections::HashMap;
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Record sets smaller than this are copied: a chunk costs an iovec and a `Bytes` clone.
pub const MIN_SHARED_LEN: usize = 4 * 1024;

/// An encoding buffer made of chunks (see the module docs).
#[derive(Debug, Default)]
pub struct ChunkedBuf {
    /// The bytes encoded since the last shared chunk.
    current: BytesMut,
    chunks: Vec<Bytes>,
    /// Bytes in `chunks`: the logical offset of `current`'s start.
    flushed: usize,
    /// Record sets to share instead of copy, by address and length.
    shared: HashMap<(usize, usize), Bytes>,
}

impl ChunkedBuf {
    /// A buffer that will reference (not copy) each of `shared` when encoded whole.
    pub fn sharing(shared: impl IntoIterator<Item = Bytes>) -> Self {
        let shared = shared
            .into_iter()
            .filter(|b| b.len() >= MIN_SHARED_LEN)
            .map(|b| ((b.as_ptr() as usize, b.len()), b))
            .collect();
        ChunkedBuf {
            shared,
            ..ChunkedBuf::default()
        }
    }

    /// Total bytes encoded.
    pub fn len(&self) -> usize {
        self.flushed + self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoded bytes, in order.
    pub fn into_chunks(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.chunks.push(self.current.freeze());
        }
        self.chunks
    }

    fn take_shared(&self, src: &[u8]) -> Option<Bytes> {
        if src.len() < MIN_SHARED_LEN {
            return None;
        }
        self.shared
            .get(&(src.as_ptr() as usize, src.len()))
            .cloned()
    }
}

// SAFETY: every method forwards to the `BytesMut` holding the unshared bytes, whose
// `BufMut` contract is thereby upheld; `put_slice` either forwards too or appends an
// already initialised `Bytes` chunk, touching no uninitialised memory.
unsafe impl BufMut for ChunkedBuf {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut`, which is `current`'s.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.take_shared(src) {
            Some(bytes) => {
                if !self.current.is_empty() {
                    let before = self.current.split().freeze();
                    self.flushed += before.len();
                    self.chunks.push(before);
                }
                self.flushed += bytes.len();
                self.chunks.push(bytes);
            }
            None => self.current.put_slice(src),
        }
    }
}

/// Gaps (sizes filled in after the fact) must lie in the bytes encoded since the last
/// shared chunk; the response encoders use none around record sets.
impl ByteBufMut for ChunkedBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    fn seek(&mut self, offset: usize) {
        let local = offset.saturating_sub(self.flushed);
        self.current.resize(local, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let start = r.start.saturating_sub(self.flushed);
        let end = r.end.saturating_sub(self.flushed);
        &mut self.current[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_slices_become_their_own_chunks_and_others_are_copied() {
        let big = Bytes::from(vec![7u8; MIN_SHARED_LEN]);
        let small = Bytes::from(vec![9u8; 10]);
        let mut buf = ChunkedBuf::sharing([big.clone(), small.clone()]);
        buf.put_i32(1);
        buf.put_slice(&big);
        buf.put_slice(&small);
        // An equal copy at another address is not shared.
        let copy = big.to_vec();
        buf.put_slice(&copy);
        buf.put_u8(2);
        assert_eq!(buf.len(), 4 + big.len() + 10 + copy.len() + 1);
        let chunks = buf.into_chunks();
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].as_ptr(), big.as_ptr(), "shared, not copied");
        let joined: Vec<u8> = chunks.concat();
        let mut expected = 1i32.to_be_bytes().to_vec();
        expected.extend_from_slice(&big);
        expected.extend_from_slice(&small);
        expected.extend_from_slice(&copy);
        expected.push(2);
        assert_eq!(joined, expected);
    }

    #[test]
    fn gaps_after_a_shared_chunk_are_filled_in_place() {
        let big = Bytes::from(vec![1u8; MIN_SHARED_LEN]);
        let mut buf = ChunkedBuf::sharing([big.clone()]);
        buf.put_slice(&big);
        let gap = buf.put_gap(4);
        buf.put_u8(5);
        buf.gap_buf(gap).copy_from_slice(&[1, 2, 3, 4]);
        let joined: Vec<u8> = buf.into_chunks().concat();
        assert_eq!(&joined[big.len()..], &[1, 2, 3, 4, 5]);
    }
}
