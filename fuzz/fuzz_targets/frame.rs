//! The connection's frame reader (`brook_protocol::frame::split_frame`): any byte stream,
//! delivered in pieces of any size, splits into frames of 10 bytes to the limit, or fails;
//! the frames and what is left are exactly the bytes given, in order.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_protocol::frame::split_frame;
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

/// A small limit, so that the fuzzer meets it.
const MAX_FRAME: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&step, stream)) = data.split_first() else {
        return;
    };
    let step = usize::from(step).max(1);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in stream.chunks(step) {
        buf.extend_from_slice(piece);
        loop {
            match split_frame(&mut buf, MAX_FRAME) {
                Ok(Some(frame)) => {
                    assert!(
                        (10..=MAX_FRAME).contains(&frame.len()),
                        "frame of {}",
                        frame.len()
                    );
                    out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
                    out.extend_from_slice(&frame);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    out.extend_from_slice(&buf);
    assert_eq!(out, stream, "frames and the rest are the stream");
});
