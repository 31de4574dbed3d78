//! The producer-state snapshot (`<offset>.snapshot`, read at start below the recovery
//! point): decoded as given, then with its CRC recomputed so the fuzzer reaches the body.
//! A decoded snapshot re-encodes to one that decodes equal.
#![no_main]

// Linked for its `#[global_allocator]`: the targets decode under the broker's allocator.
use brook_fuzz as _;
use brook_storage::producer_snapshot::{decode, encode};
use libfuzzer_sys::fuzz_target;

fn check(bytes: &[u8]) {
    if let Some((offset, state)) = decode(bytes) {
        let again = decode(&encode(offset, &state)).expect("a re-encoded snapshot decodes");
        assert_eq!(again.0, offset);
        assert_eq!(again.1, state);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut sealed = data.to_vec();
    if sealed.len() >= 4 {
        let body = sealed.len() - 4;
        let crc = crc32c::crc32c(&sealed[..body]);
        sealed[body..].copy_from_slice(&crc.to_be_bytes());
        check(&sealed);
    }
});
