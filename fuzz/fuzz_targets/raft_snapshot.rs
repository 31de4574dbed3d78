//! The metadata snapshot (the file a voter loads at start, and the bytes InstallSnapshot
//! sends): decoded as the state machine decodes it; a decoded image reads back equal from
//! its own JSON.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_raft::fuzzing::decode_snapshot;
use brook_raft::MetadataImage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(image) = decode_snapshot(data) else {
        return;
    };
    let json = serde_json::to_vec(&image).expect("an image encodes");
    let back: MetadataImage = serde_json::from_slice(&json).expect("an image decodes");
    assert_eq!(back, image, "image JSON round trip");
});
