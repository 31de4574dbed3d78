//! The small text and binary files of a log directory: the `*-checkpoint` files (recovery
//! point, high watermark, log start offset: topic partition offset lines), the
//! `leader-epoch-checkpoint` and the `.txnindex` entries. What parses renders back to what
//! parses equal. The first byte picks the reader.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_storage::checkpoint;
use brook_storage::fuzzing::parse_leader_epoch_checkpoint;
use brook_storage::txn_index;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, data)) = data.split_first() else {
        return;
    };
    match kind % 3 {
        0 => {
            let Ok(text) = std::str::from_utf8(data) else {
                return;
            };
            if let Some(offsets) = checkpoint::parse(text) {
                let rendered = checkpoint::render(&offsets);
                assert_eq!(checkpoint::parse(&rendered), Some(offsets), "{rendered:?}");
            }
        }
        1 => {
            let Ok(text) = std::str::from_utf8(data) else {
                return;
            };
            let _ = parse_leader_epoch_checkpoint(text);
        }
        _ => {
            let Some((bounds, bytes)) = data.split_first_chunk::<16>() else {
                return;
            };
            let base = i64::from_be_bytes(bounds[..8].try_into().expect("8 bytes"));
            let next = i64::from_be_bytes(bounds[8..].try_into().expect("8 bytes"));
            for entry in txn_index::decode_valid(bytes, base, next) {
                assert_eq!(txn_index::AbortedTxn::decode(&entry.encode()), Some(entry));
            }
        }
    }
});
