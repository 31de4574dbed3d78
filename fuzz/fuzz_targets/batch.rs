//! Record batches as produce, recovery and the cleaner read them: header and CRC checks
//! (`validate_batch`, `BatchIter`), the producer checks, end-transaction markers, record
//! decoding, and the cleaner's decompress-filter-rewrite of each batch. The input is run
//! as given, then with every batch's CRC recomputed so the fuzzer reaches the records.
#![no_main]

use brook_fuzz::seal_batches;
use brook_storage::batch::{self, validate_produce_header, BatchIter};
use brook_storage::control::parse_end_txn_marker;
use brook_storage::fuzzing::clean_batch;
use libfuzzer_sys::fuzz_target;

fn check(buf: &[u8]) {
    for item in BatchIter::new(buf) {
        let Ok((at, header)) = item else {
            break;
        };
        let whole = &buf[at..at + header.size()];
        let _ = validate_produce_header(&header);
        if header.is_control() {
            let _ = parse_end_txn_marker(whole, &header);
        }
        // The base offset and leader epoch lie outside the CRC: stamping keeps it valid.
        let mut stamped = whole.to_vec();
        batch::stamp_offset_and_epoch(&mut stamped, header.base_offset ^ 0x55, 7);
        assert!(
            batch::validate_batch(&stamped).is_ok(),
            "stamping broke the CRC"
        );
        // Every key's latest offset either this batch's base (records kept) or past it
        // (records of the keys with an odd first byte removed).
        clean_batch(whole, header.max_timestamp, |key| match key.first() {
            Some(b) if b % 2 == 1 => i64::MAX,
            _ => header.base_offset,
        });
    }
    let _ = brook_storage::cleaner::decode_records(buf);
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut sealed = data.to_vec();
    seal_batches(&mut sealed);
    if sealed != data {
        check(&sealed);
    }
});
