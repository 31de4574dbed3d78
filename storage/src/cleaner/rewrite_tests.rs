//! Tests of `rewrite`: which records stay, tombstone horizons, every codec.

use super::*;
use crate::batch::{stamp_offset_and_epoch, validate_batch, Compression};
use crate::testing::{encode_batch, TestBatch, TestRecord};

fn keyed(base_offset: i64, records: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut batch = TestBatch::values(10_000, &[]).with_producer(7, 1, 100);
    batch.records = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| TestRecord {
            key: Some(k.as_bytes().to_vec()),
            value: v.map(|v| v.as_bytes().to_vec()),
            timestamp_delta: i as i64 * 10,
        })
        .collect();
    let mut bytes = encode_batch(&batch);
    stamp_offset_and_epoch(&mut bytes, base_offset, 3);
    bytes
}

/// The same batch with its payload compressed by `codec`.
fn compressed(bytes: &[u8], codec: Compression, id: i16) -> Vec<u8> {
    let header = validate_batch(bytes).expect("valid");
    let body = codec::compress(codec, &bytes[BATCH_HEADER_LEN..]).expect("compress");
    encode(
        &header,
        header.attributes | id,
        header.base_timestamp,
        header.max_timestamp,
        header.records_count as usize,
        &body,
    )
}

/// (offset, key, value) of every record of a batch.
fn contents(bytes: &[u8]) -> Vec<(i64, String, Option<String>)> {
    let header = validate_batch(bytes).expect("valid crc");
    let payload = payload(bytes, &header).expect("decodes");
    parse_records(&payload, header.records_count)
        .expect("parses")
        .iter()
        .map(|r| {
            let value = {
                // Re-read the value: skip offsetDelta and key in `after_timestamp`.
                let mut at = 0;
                let body = r.after_timestamp;
                crate::cleaner::record::read_varlong(body, &mut at);
                let klen = crate::cleaner::record::read_varlong(body, &mut at).unwrap_or(-1);
                at += klen.max(0) as usize;
                let vlen = crate::cleaner::record::read_varlong(body, &mut at).unwrap_or(-1);
                (vlen >= 0)
                    .then(|| String::from_utf8_lossy(&body[at..at + vlen as usize]).into_owned())
            };
            (
                header.base_offset + r.offset_delta,
                String::from_utf8_lossy(r.key.unwrap_or_default()).into_owned(),
                value,
            )
        })
        .collect()
}

fn map_of(entries: &[(&str, i64)]) -> OffsetMap {
    let mut map = OffsetMap::new(1 << 20);
    for (k, o) in entries {
        assert!(map.put(k.as_bytes(), *o));
    }
    map
}

fn ctx(map: &OffsetMap, now_ms: i64) -> FilterContext<'_> {
    FilterContext {
        map,
        end_offset: i64::MAX,
        now_ms,
        delete_retention_ms: 1_000,
    }
}

#[test]
fn only_the_latest_record_per_key_stays_with_offsets_and_producer_fields() {
    let bytes = keyed(
        100,
        &[
            ("a", Some("1")),
            ("b", Some("2")),
            ("a", Some("3")),
            ("c", Some("4")),
        ],
    );
    let map = map_of(&[("a", 102), ("b", 101), ("c", 103)]);
    let Filtered::Rewritten {
        bytes: out,
        records_removed,
        delete_horizon,
    } = filter_batch(
        &bytes,
        &validate_batch(&bytes).expect("valid"),
        TxnRole::Keyed,
        ctx(&map, 0),
    )
    else {
        panic!("expected a rewrite");
    };
    assert_eq!(records_removed, 1);
    assert_eq!(delete_horizon, None);
    let header = validate_batch(&out).expect("crc valid");
    assert_eq!(header.base_offset, 100);
    assert_eq!(header.last_offset_delta, 3);
    assert_eq!(header.records_count, 3);
    assert_eq!(
        (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence
        ),
        (7, 1, 100)
    );
    assert_eq!(header.partition_leader_epoch, 3);
    assert_eq!(header.max_timestamp, 10_030);
    assert_eq!(
        contents(&out),
        vec![
            (101, "b".into(), Some("2".into())),
            (102, "a".into(), Some("3".into())),
            (103, "c".into(), Some("4".into()))
        ]
    );
}

#[test]
fn a_batch_of_latest_records_is_copied_and_a_superseded_one_empties() {
    let bytes = keyed(0, &[("a", Some("1")), ("b", Some("2"))]);
    let header = validate_batch(&bytes).expect("valid");
    let map = map_of(&[("a", 0), ("b", 1)]);
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 0)),
        Filtered::Unchanged
    );
    let map = map_of(&[("a", 5), ("b", 6)]);
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 0)),
        Filtered::Empty { records_removed: 2 }
    );
    let empty = empty_batch(&header);
    let e = validate_batch(&empty).expect("valid");
    assert_eq!(
        (e.base_offset, e.last_offset_delta, e.records_count),
        (0, 1, 0)
    );
    assert_eq!(e.last_sequence(), header.last_sequence());
}

#[test]
fn records_past_the_map_and_keys_outside_it_stay() {
    let bytes = keyed(10, &[("a", Some("1")), ("a", Some("2"))]);
    let header = validate_batch(&bytes).expect("valid");
    // The pass ends at 11: offset 11 was not indexed, so 10 is latest as far as it knows.
    let map = map_of(&[("a", 10)]);
    let bounded = FilterContext {
        end_offset: 11,
        ..ctx(&map, 0)
    };
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, bounded),
        Filtered::Unchanged
    );
    let map = map_of(&[("z", 11)]);
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 0)),
        Filtered::Unchanged
    );
}

#[test]
fn a_tombstone_gets_a_horizon_then_goes_after_it() {
    let bytes = keyed(0, &[("a", Some("1")), ("b", None)]);
    let header = validate_batch(&bytes).expect("valid");
    let map = map_of(&[("a", 0), ("b", 1)]);
    let Filtered::Rewritten {
        bytes: marked,
        records_removed: 0,
        delete_horizon: Some(6_000),
    } = filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 5_000))
    else {
        panic!("expected the horizon to be set");
    };
    let h = validate_batch(&marked).expect("valid");
    assert_eq!(delete_horizon(&h), Some(6_000));
    assert_eq!(h.max_timestamp, header.max_timestamp);
    assert_eq!(contents(&marked), contents(&bytes));
    // Record timestamps are unchanged although the base moved.
    let payload = payload(&marked, &h).expect("payload");
    let records = parse_records(&payload, 2).expect("parse");
    assert_eq!(h.base_timestamp + records[1].timestamp_delta, 10_010);
    // Before the horizon: nothing changes; after it: the tombstone goes.
    assert_eq!(
        filter_batch(&marked, &h, TxnRole::Keyed, ctx(&map, 5_999)),
        Filtered::Unchanged
    );
    let Filtered::Rewritten {
        bytes: done,
        records_removed: 1,
        delete_horizon: None,
    } = filter_batch(&marked, &h, TxnRole::Keyed, ctx(&map, 6_000))
    else {
        panic!("expected the tombstone to go");
    };
    assert_eq!(contents(&done), vec![(0, "a".into(), Some("1".into()))]);
}

#[test]
fn compressed_batches_round_trip_with_their_codec() {
    let plain = keyed(
        0,
        &[("a", Some("old")), ("b", Some("x")), ("a", Some("new"))],
    );
    let map = map_of(&[("a", 2), ("b", 1)]);
    for (codec, id) in [
        (Compression::Gzip, 1),
        (Compression::Snappy, 2),
        (Compression::Lz4, 3),
        (Compression::Zstd, 4),
    ] {
        let bytes = compressed(&plain, codec, id);
        let header = validate_batch(&bytes).expect("valid");
        assert_eq!(header.compression(), codec);
        let Filtered::Rewritten {
            bytes: out,
            records_removed: 1,
            ..
        } = filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 0))
        else {
            panic!("{codec:?}: expected a rewrite");
        };
        assert_eq!(validate_batch(&out).expect("crc").compression(), codec);
        assert_eq!(
            contents(&out),
            vec![
                (1, "b".into(), Some("x".into())),
                (2, "a".into(), Some("new".into()))
            ],
            "{codec:?}"
        );
    }
}

#[test]
fn control_and_undecodable_batches_are_kept_as_is() {
    let bytes = keyed(0, &[("a", Some("1"))]);
    let mut header = validate_batch(&bytes).expect("valid");
    let map = map_of(&[("a", 9)]);
    header.attributes |= CONTROL_BIT;
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 0)),
        Filtered::Unchanged
    );
    header.attributes = 6; // unknown codec
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 0)),
        Filtered::Unreadable
    );
}

fn marker_at(offset: i64, timestamp: i64) -> Vec<u8> {
    let mut batch = TestBatch::marker(7, 1, crate::control::ControlType::Abort, 4);
    batch.base_timestamp = timestamp;
    let mut bytes = encode_batch(&batch);
    stamp_offset_and_epoch(&mut bytes, offset, 3);
    bytes
}

#[test]
fn a_batch_of_an_aborted_transaction_empties_whatever_its_keys() {
    let bytes = keyed(10, &[("a", Some("1")), ("b", None)]);
    let header = validate_batch(&bytes).expect("valid");
    // Neither key is superseded: only the transaction's outcome removes them.
    let map = map_of(&[("a", 10), ("b", 11)]);
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Aborted, ctx(&map, 0)),
        Filtered::Empty { records_removed: 2 }
    );
}

#[test]
fn a_marker_without_data_gets_a_horizon_then_goes_after_it() {
    let map = map_of(&[]);
    let bytes = marker_at(20, 1_234);
    let header = validate_batch(&bytes).expect("valid");
    // While its transaction may still have data, or untouched by the pass: as is.
    assert_eq!(
        filter_batch(&bytes, &header, TxnRole::Keyed, ctx(&map, 5_000)),
        Filtered::Unchanged
    );
    let Filtered::Rewritten {
        bytes: marked,
        records_removed: 0,
        delete_horizon: Some(6_000),
    } = filter_batch(&bytes, &header, TxnRole::MarkerDone, ctx(&map, 5_000))
    else {
        panic!("the marker gets a delete horizon");
    };
    let h = validate_batch(&marked).expect("valid crc");
    assert_eq!(h.attributes, header.attributes | DELETE_HORIZON_BIT);
    assert_eq!((h.base_timestamp, h.max_timestamp), (6_000, 1_234));
    assert_eq!(
        (
            h.base_offset,
            h.producer_id,
            h.producer_epoch,
            h.partition_leader_epoch
        ),
        (20, 7, 1, 3)
    );
    // Still the same marker, its record's timestamp unchanged.
    let m = crate::control::parse_end_txn_marker(&marked, &h).expect("a marker");
    assert_eq!(
        (m.control_type, m.coordinator_epoch),
        (crate::control::ControlType::Abort, 4)
    );
    let payload = payload(&marked, &h).expect("payload");
    let record = &parse_records(&payload, 1).expect("record")[0];
    assert_eq!(h.base_timestamp + record.timestamp_delta, 1_234);
    assert_eq!(
        filter_batch(&marked, &h, TxnRole::MarkerDone, ctx(&map, 5_999)),
        Filtered::Unchanged
    );
    assert_eq!(
        filter_batch(&marked, &h, TxnRole::MarkerDone, ctx(&map, 6_000)),
        Filtered::Empty { records_removed: 1 }
    );
    // A group's last batch leaves a placeholder with its offsets and nothing else.
    let placeholder = placeholder_batch(&h);
    let ph = validate_batch(&placeholder).expect("valid");
    assert!(!ph.is_control() && !ph.is_transactional() && !ph.has_producer_id());
    assert_eq!(
        (ph.records_count, ph.base_offset, ph.last_offset()),
        (0, 20, 20)
    );
    // An empty control batch (Kafka's cleaner leaves them) goes whatever its role.
    let empty = empty_batch(&h);
    let eh = validate_batch(&empty).expect("valid");
    assert!(eh.is_control() && eh.is_transactional());
    assert_eq!((eh.records_count, eh.last_offset()), (0, 20));
    assert_eq!(
        filter_batch(&empty, &eh, TxnRole::Keyed, ctx(&map, 0)),
        Filtered::Empty { records_removed: 0 }
    );
}

/// Found by the `batch` fuzz target: a transaction marker whose record carries a timestamp
/// delta near i64::MAX. Giving it a delete horizon rebased the delta and overflowed (a panic
/// in debug builds, a wrapped timestamp in release); it is now kept as is, unreadable.
#[test]
fn a_marker_whose_record_timestamp_overflows_is_kept_as_is() {
    const MARKER: [u8; 88] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x57, 0x00, 0x00, 0x00, 0x42, 0x00, 0x00, 0x00,
        0x00, 0x02, 0xdf, 0xcd, 0xa6, 0x40, 0x00, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
        0xa2, 0x46, 0x00, 0x05, 0x00, 0x79, 0xa2, 0xe7, 0x01, 0x46, 0x05, 0x79, 0xe7, 0x00, 0x08,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0xff, 0xff, 0xff, 0xbf, 0x00, 0x00, 0x00,
        0x01, 0x20, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x00, 0x99, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfb, 0x00, 0x00, 0x00, 0x00,
    ];
    let mut batch = MARKER.to_vec();
    batch.truncate(BatchHeader::parse(&batch).expect("a header").size());
    crate::batch::seal_crc(&mut batch);
    let header = validate_batch(&batch).expect("a whole batch");
    let map = OffsetMap::new(1 << 10);
    let ctx = FilterContext {
        map: &map,
        end_offset: i64::MAX,
        now_ms: header.max_timestamp,
        delete_retention_ms: 86_400_000,
    };
    assert_eq!(
        filter_batch(&batch, &header, TxnRole::MarkerDone, ctx),
        Filtered::Unreadable
    );
}
