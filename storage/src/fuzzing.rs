//! Entry points for the fuzz crate (`fuzz/`, feature `fuzzing`) into the decoders that are
//! private to this crate: the cleaner's payload decompression and record parsing, and the
//! parsers of the small checkpoint files. Each function runs the same code the broker runs
//! and panics only where an invariant the fuzzer checks is broken; never built otherwise.

use crate::batch::{self, Compression};
use crate::cleaner::codec;
use crate::cleaner::offset_map::OffsetMap;
use crate::cleaner::record::parse_records;
use crate::cleaner::rewrite::{self, FilterContext, Filtered, TxnRole};
use crate::log::epoch_cache;

/// The cleaner's decompression bound in these runs: large enough for any seed, small
/// enough that a decompression bomb costs milliseconds, not the real 256 MiB.
const PAYLOAD_LIMIT: usize = 4 << 20;

/// The codec with attribute id `id & 7` (bits 0-2 of a batch's attributes).
pub fn codec(id: u8) -> Compression {
    Compression::from_attributes(i16::from(id))
}

/// The cleaner's decompression of `data` (bounded as the fuzz runs bound it).
pub fn decompress(codec: Compression, data: &[u8]) -> Option<Vec<u8>> {
    codec::decompress(codec, data, PAYLOAD_LIMIT)
}

/// The cleaner's compression of `data`.
pub fn compress(codec: Compression, data: &[u8]) -> Option<Vec<u8>> {
    codec::compress(codec, data)
}

/// Runs the cleaner on the first batch of `buf` (header and CRC as the cleaner reads them):
/// decompression, record parsing, and the filtering decision against an offset map in
/// which every key's latest offset is `key_offset(key)`; a rewritten batch must validate
/// (length, CRC) and hold exactly the records kept.
pub fn clean_batch(buf: &[u8], now_ms: i64, key_offset: impl Fn(&[u8]) -> i64) {
    let Ok(header) = batch::validate_batch(buf) else {
        return;
    };
    let Some(whole) = buf.get(..header.size()) else {
        return;
    };
    let mut map = OffsetMap::new(1 << 20);
    let payload = rewrite::payload(whole, &header);
    let records = payload
        .as_deref()
        .and_then(|p| parse_records(p, header.records_count));
    for key in records.iter().flatten().filter_map(|r| r.key) {
        map.put(key, key_offset(key));
    }
    let ctx = FilterContext {
        map: &map,
        end_offset: i64::MAX,
        now_ms,
        delete_retention_ms: 86_400_000,
    };
    for role in [TxnRole::Keyed, TxnRole::Aborted, TxnRole::MarkerDone] {
        if let Filtered::Rewritten {
            bytes,
            records_removed,
            ..
        } = rewrite::filter_batch(whole, &header, role, ctx)
        {
            let rewritten = batch::validate_batch(&bytes).expect("a rewritten batch validates");
            assert_eq!(
                rewritten.size(),
                bytes.len(),
                "a rewritten batch is one batch"
            );
            let kept = usize::try_from(header.records_count).unwrap_or(0) - records_removed;
            assert_eq!(
                usize::try_from(rewritten.records_count).ok(),
                Some(kept),
                "a rewritten batch holds the records kept"
            );
            let payload = rewrite::payload(&bytes, &rewritten).expect("its payload decodes");
            let records = parse_records(&payload, rewritten.records_count);
            assert_eq!(records.map(|r| r.len()), Some(kept), "its records parse");
        }
    }
}

/// The parser of `leader-epoch-checkpoint`: (epoch, start offset) pairs.
pub fn parse_leader_epoch_checkpoint(text: &str) -> Option<Vec<(i32, i64)>> {
    epoch_cache::parse(text)
        .map(|entries| entries.iter().map(|e| (e.epoch, e.start_offset)).collect())
}
