//! Size-prefixed frames: a big-endian i32 length, then that many bytes.
//!
//! The length is checked against `socket.request.max.bytes` before any of the body is
//! buffered, so a client claiming a 2 GiB frame costs us four bytes, not 2 GiB.

use bytes::{Buf, BytesMut};

use crate::ProtocolError;

/// The smallest request: api key (2) + api version (2) + correlation id (4) + client id length (2).
const MIN_REQUEST_SIZE: i32 = 10;

/// Splits one whole frame off the front of `buf`, without its length prefix.
/// `Ok(None)` means more bytes are needed; an error means the connection must close.
/// Nothing is reserved here: how much of a frame is buffered, and from which memory, is the
/// reader's choice (the broker's request memory pool).
pub fn split_frame(buf: &mut BytesMut, max_size: usize) -> Result<Option<BytesMut>, ProtocolError> {
    let Some(size) = frame_size(buf, max_size)? else {
        return Ok(None);
    };
    if buf.len() < 4 + size {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(size)))
}

/// The body size the frame at the front of `buf` announces, once its 4-byte prefix is
/// there, checked against `max_size` (`socket.request.max.bytes`) and the smallest request.
pub fn frame_size(buf: &[u8], max_size: usize) -> Result<Option<usize>, ProtocolError> {
    let Some(size) = peek_size(buf) else {
        return Ok(None);
    };
    if size < MIN_REQUEST_SIZE {
        return Err(ProtocolError::InvalidFrameSize { size });
    }
    let size = size as usize; // non-negative: checked above
    if size > max_size {
        return Err(ProtocolError::FrameTooLarge {
            size: size as i64,
            max: max_size,
        });
    }
    Ok(Some(size))
}

fn peek_size(buf: &[u8]) -> Option<i32> {
    let prefix: [u8; 4] = buf.get(..4)?.try_into().ok()?;
    Some(i32::from_be_bytes(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_whole_frame_then_splits_it() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 12, 1, 2, 3][..]);
        assert!(split_frame(&mut buf, 100).expect("valid").is_none());
        buf.extend_from_slice(&[4, 5, 6, 7, 8, 9, 10, 11, 12, 99]);
        let frame = split_frame(&mut buf, 100).expect("valid").expect("whole");
        assert_eq!(&frame[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(&buf[..], &[99]);
    }

    #[test]
    fn refuses_an_oversized_frame_before_buffering_it() {
        let mut buf = BytesMut::from(&[0x7fu8, 0xff, 0xff, 0xff][..]);
        let err = split_frame(&mut buf, 100 * 1024 * 1024).expect_err("too large");
        assert!(matches!(err, ProtocolError::FrameTooLarge { .. }));
    }

    #[test]
    fn refuses_negative_and_tiny_sizes() {
        for prefix in [[0xffu8, 0xff, 0xff, 0xff], [0, 0, 0, 3]] {
            let mut buf = BytesMut::from(&prefix[..]);
            assert!(matches!(
                split_frame(&mut buf, 1024),
                Err(ProtocolError::InvalidFrameSize { .. })
            ));
        }
    }
}
