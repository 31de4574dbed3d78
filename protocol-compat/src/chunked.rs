//! An encoding buffer that does not copy a fetch response's record sets (issue #13).
//!
//! The `kafka-protocol` encoders write a `Bytes` field with one `put_slice` of the whole
//! value. `ChunkedBuf` recognises a slice that *is* one of the record sets it was given
//! (same address, same length) and keeps a reference to it instead of copying it: the
//! encoded response becomes a list of chunks (the encoded fields between record sets,
//! and the record sets themselves) that the connection writes with vectored writes. A
//! record set then goes from the read buffer to the socket with no copy in between.
//!
//! A record set may also stay in its files (zero-copy fetch): the handler puts a
//! [`placeholder`] of the right length in the response, and registers what the bytes
//! really are (file ranges, an `E` this crate does not look into) with
//! [`ChunkedBuf::external`]; the encoded response then holds a [`Chunk::External`] where
//! the placeholder's bytes would be, for the connection to send with `sendfile`.

#![allow(unsafe_code)] // `BufMut` is an unsafe trait; every method delegates to `BytesMut`.

use std::collections::HashMap;
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Record sets smaller than this are copied: a chunk costs an iovec and a `Bytes` clone.
pub const MIN_SHARED_LEN: usize = 4 * 1024;

/// The largest record set a [`placeholder`] can stand for.
pub const MAX_PLACEHOLDER_LEN: usize = 32 << 20;

/// Address space for placeholders: each starts at its own index, so no two of one
/// response share an address. Zero-initialised, so it lives in `.bss` and costs no
/// memory: its bytes are never read, only its addresses are compared.
static PLACEHOLDER_SPACE: [u8; 2 * MAX_PLACEHOLDER_LEN] = [0; 2 * MAX_PLACEHOLDER_LEN];

/// A stand-in of `len` bytes for the `index`-th external record set of a response
/// (distinct indexes give distinct placeholders); `None` when `len` is over
/// [`MAX_PLACEHOLDER_LEN`] or `index` too large.
pub fn placeholder(index: usize, len: usize) -> Option<Bytes> {
    if len > MAX_PLACEHOLDER_LEN || index >= MAX_PLACEHOLDER_LEN {
        return None;
    }
    PLACEHOLDER_SPACE
        .get(index..index + len)
        .map(Bytes::from_static)
}

/// One piece of an encoded response.
#[derive(Debug, Clone)]
pub enum Chunk<E> {
    Bytes(Bytes),
    /// Bytes held elsewhere (a record set left in its files), registered for a placeholder.
    External(E),
}

/// Chunks whose length the connection needs without looking inside.
pub trait ChunkLen {
    fn chunk_len(&self) -> usize;
}

impl ChunkLen for () {
    fn chunk_len(&self) -> usize {
        0
    }
}

impl<E: ChunkLen> Chunk<E> {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(bytes) => bytes.len(),
            Chunk::External(e) => e.chunk_len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An encoding buffer made of chunks (see the module docs).
#[derive(Debug)]
pub struct ChunkedBuf<E = ()> {
    /// The bytes encoded since the last shared chunk.
    current: BytesMut,
    chunks: Vec<Chunk<E>>,
    /// Bytes in `chunks`: the logical offset of `current`'s start.
    flushed: usize,
    /// Record sets to share instead of copy, and placeholders to replace, by address
    /// and length.
    shared: HashMap<(usize, usize), Chunk<E>>,
}

impl<E> Default for ChunkedBuf<E> {
    fn default() -> Self {
        ChunkedBuf {
            current: BytesMut::new(),
            chunks: Vec::new(),
            flushed: 0,
            shared: HashMap::new(),
        }
    }
}

impl<E: Clone> ChunkedBuf<E> {
    /// A buffer that will reference (not copy) each of `shared` when encoded whole.
    pub fn sharing(shared: impl IntoIterator<Item = Bytes>) -> Self {
        let shared = shared
            .into_iter()
            .filter(|b| b.len() >= MIN_SHARED_LEN)
            .map(|b| ((b.as_ptr() as usize, b.len()), Chunk::Bytes(b)))
            .collect();
        ChunkedBuf {
            shared,
            ..ChunkedBuf::default()
        }
    }

    /// Encodes `external` wherever `placeholder` (from [`placeholder`]) is put whole.
    pub fn external(&mut self, placeholder: &Bytes, external: E) {
        self.shared.insert(
            (placeholder.as_ptr() as usize, placeholder.len()),
            Chunk::External(external),
        );
    }

    /// Total bytes encoded.
    pub fn len(&self) -> usize {
        self.flushed + self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoded bytes, in order.
    pub fn into_chunks(mut self) -> Vec<Chunk<E>> {
        if !self.current.is_empty() {
            self.chunks.push(Chunk::Bytes(self.current.freeze()));
        }
        self.chunks
    }

    fn take_shared(&self, src: &[u8]) -> Option<Chunk<E>> {
        if self.shared.is_empty() {
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
unsafe impl<E: Clone + ChunkLen> BufMut for ChunkedBuf<E> {
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
            Some(chunk) => {
                if !self.current.is_empty() {
                    let before = self.current.split().freeze();
                    self.flushed += before.len();
                    self.chunks.push(Chunk::Bytes(before));
                }
                // Counted at the placeholder's length, which the encoder wrote as the
                // field's size (an external chunk has the same length by construction).
                self.flushed += src.len();
                self.chunks.push(chunk);
            }
            None => self.current.put_slice(src),
        }
    }
}

/// Gaps (sizes filled in after the fact) must lie in the bytes encoded since the last
/// shared chunk; the response encoders use none around record sets.
impl<E: Clone + ChunkLen> ByteBufMut for ChunkedBuf<E> {
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
        let mut buf = ChunkedBuf::<()>::sharing([big.clone(), small.clone()]);
        buf.put_i32(1);
        buf.put_slice(&big);
        buf.put_slice(&small);
        // An equal copy at another address is not shared.
        let copy = big.to_vec();
        buf.put_slice(&copy);
        buf.put_u8(2);
        assert_eq!(buf.len(), 4 + big.len() + 10 + copy.len() + 1);
        let chunks = bytes_of(buf.into_chunks());
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
        let mut buf = ChunkedBuf::<()>::sharing([big.clone()]);
        buf.put_slice(&big);
        let gap = buf.put_gap(4);
        buf.put_u8(5);
        buf.gap_buf(gap).copy_from_slice(&[1, 2, 3, 4]);
        let joined: Vec<u8> = bytes_of(buf.into_chunks()).concat();
        assert_eq!(&joined[big.len()..], &[1, 2, 3, 4, 5]);
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Far(usize);

    impl ChunkLen for Far {
        fn chunk_len(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn placeholders_become_external_chunks_at_their_place() {
        let a = placeholder(0, 5000).expect("fits");
        let b = placeholder(1, 5000).expect("fits");
        assert_ne!(
            a.as_ptr(),
            b.as_ptr(),
            "distinct indexes, distinct placeholders"
        );
        assert!(placeholder(0, MAX_PLACEHOLDER_LEN + 1).is_none());
        let mut buf = ChunkedBuf::sharing(std::iter::empty());
        buf.external(&a, Far(5000));
        buf.external(&b, Far(5000));
        buf.put_i32(7);
        buf.put_slice(&a);
        buf.put_u8(1);
        buf.put_slice(&b);
        assert_eq!(buf.len(), 4 + 5000 + 1 + 5000);
        let chunks = buf.into_chunks();
        assert_eq!(chunks.len(), 4);
        assert!(matches!(&chunks[1], Chunk::External(Far(5000))));
        assert!(matches!(&chunks[3], Chunk::External(Far(5000))));
        assert!(matches!(&chunks[2], Chunk::Bytes(b) if b[..] == [1]));
        assert_eq!(chunks.iter().map(Chunk::len).sum::<usize>(), 10_005);
    }

    fn bytes_of(chunks: Vec<Chunk<()>>) -> Vec<Bytes> {
        chunks
            .into_iter()
            .map(|c| match c {
                Chunk::Bytes(b) => b,
                Chunk::External(()) => Bytes::new(),
            })
            .collect()
    }
}
