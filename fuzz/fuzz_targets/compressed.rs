//! The cleaner's codecs (gzip, xerial and raw snappy, lz4 frames, zstd): any input
//! decompresses or fails within the bound, and compressing then decompressing any data
//! gives it back. The first byte picks the codec (attribute bits 0-2).
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_storage::fuzzing::{codec, compress, decompress};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&id, data)) = data.split_first() else {
        return;
    };
    let codec = codec(id);
    let _ = decompress(codec, data);
    if let Some(compressed) = compress(codec, data) {
        assert_eq!(
            decompress(codec, &compressed).as_deref(),
            Some(data),
            "{codec:?} round trip"
        );
    }
});
