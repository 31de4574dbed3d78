//! Pure key and value encodings of the offset store (no I/O); the layout is documented in
//! `storage/FORMAT.md` ("Consumer-offset store").
//!
//! Keys of the `offsets` column family are `u32 BE len ‖ group ‖ u32 BE len ‖ topic ‖ i32 BE
//! partition`. The length prefixes make a group's keys exactly one prefix range that no other
//! group shares: group "a" has prefix `00 00 00 01 61`, group "ab" has `00 00 00 02 61 62`,
//! so scanning "a" can never run into "ab" (a plain concatenation would).
//!
//! Values start with a version byte so the value layout can evolve without rewriting keys.
//! Decoding never trusts its input: every length is checked before slicing and strings must
//! be UTF-8, so a corrupt store yields an error instead of a panic.

use super::CommittedOffset;

/// Version byte of the only value layout written today.
pub(crate) const VALUE_VERSION_1: u8 = 1;
/// Fixed part of a version-1 value: version, offset, leader epoch, commit timestamp,
/// metadata length.
const VALUE_V1_FIXED: usize = 1 + 8 + 4 + 8 + 4;

/// Appends `bytes` with its u32 big-endian length in front.
fn put_len_prefixed(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), String> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| format!("string of {} bytes is too long", bytes.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// Splits a u32-length-prefixed UTF-8 string off the front of `input`.
fn take_len_prefixed<'a>(input: &'a [u8], what: &str) -> Result<(&'a str, &'a [u8]), String> {
    let (len, rest) = take_array::<4>(input, what)?;
    let len = usize::try_from(u32::from_be_bytes(len))
        .map_err(|_| format!("{what} length does not fit in memory"))?;
    if rest.len() < len {
        return Err(format!(
            "{what} claims {len} bytes, only {} left",
            rest.len()
        ));
    }
    let (bytes, rest) = rest.split_at(len);
    let s = std::str::from_utf8(bytes).map_err(|e| format!("{what} is not UTF-8: {e}"))?;
    Ok((s, rest))
}

/// Splits `N` bytes off the front of `input`.
fn take_array<'a, const N: usize>(
    input: &'a [u8],
    what: &str,
) -> Result<([u8; N], &'a [u8]), String> {
    if input.len() < N {
        return Err(format!("{what} needs {N} bytes, only {} left", input.len()));
    }
    let (head, rest) = input.split_at(N);
    let array: [u8; N] = head
        .try_into()
        .map_err(|_| format!("{what} needs {N} bytes"))?;
    Ok((array, rest))
}

/// The key prefix shared by every offset of `group` (and by no other group).
pub(crate) fn group_prefix(group: &str) -> Result<Vec<u8>, String> {
    let mut key = Vec::with_capacity(4 + group.len());
    put_len_prefixed(&mut key, group.as_bytes())?;
    Ok(key)
}

/// The key of one consumer-group record: the group's prefix, then the record's own
/// `__consumer_offsets` key (which names the group again: it is kept whole, as written).
pub(crate) fn record_key(group: &str, record_key: &[u8]) -> Result<Vec<u8>, String> {
    let mut key = group_prefix(group)?;
    key.extend_from_slice(record_key);
    Ok(key)
}

/// The key of one committed offset.
pub(crate) fn offset_key(group: &str, topic: &str, partition: i32) -> Result<Vec<u8>, String> {
    let mut key = Vec::with_capacity(12 + group.len() + topic.len());
    put_len_prefixed(&mut key, group.as_bytes())?;
    put_len_prefixed(&mut key, topic.as_bytes())?;
    key.extend_from_slice(&partition.to_be_bytes());
    Ok(key)
}

/// The group of an `offsets` key, and the length of that group's prefix in the key.
pub(crate) fn decode_key_group(key: &[u8]) -> Result<(&str, usize), String> {
    let (group, rest) = take_len_prefixed(key, "group")?;
    Ok((group, key.len() - rest.len()))
}

/// Decodes an `offsets` key into `(group, topic, partition)`; the key must end there.
pub(crate) fn decode_offset_key(key: &[u8]) -> Result<(&str, &str, i32), String> {
    let (group, rest) = take_len_prefixed(key, "group")?;
    let (topic, rest) = take_len_prefixed(rest, "topic")?;
    let (partition, rest) = take_array::<4>(rest, "partition")?;
    if !rest.is_empty() {
        return Err(format!("{} trailing bytes after the partition", rest.len()));
    }
    Ok((group, topic, i32::from_be_bytes(partition)))
}

/// Encodes a committed offset as a version-1 value.
pub(crate) fn encode_value(offset: &CommittedOffset) -> Result<Vec<u8>, String> {
    let mut value = Vec::with_capacity(VALUE_V1_FIXED + offset.metadata.len());
    value.push(VALUE_VERSION_1);
    value.extend_from_slice(&offset.offset.to_be_bytes());
    value.extend_from_slice(&offset.leader_epoch.to_be_bytes());
    value.extend_from_slice(&offset.commit_timestamp_ms.to_be_bytes());
    put_len_prefixed(&mut value, offset.metadata.as_bytes())?;
    Ok(value)
}

/// Decodes a value; unknown versions and trailing bytes are errors.
pub(crate) fn decode_value(value: &[u8]) -> Result<CommittedOffset, String> {
    let (version, rest) = take_array::<1>(value, "value version")?;
    if version[0] != VALUE_VERSION_1 {
        return Err(format!("unknown value version {}", version[0]));
    }
    let (offset, rest) = take_array::<8>(rest, "offset")?;
    let (leader_epoch, rest) = take_array::<4>(rest, "leader epoch")?;
    let (commit_timestamp_ms, rest) = take_array::<8>(rest, "commit timestamp")?;
    let (metadata, rest) = take_len_prefixed(rest, "metadata")?;
    if !rest.is_empty() {
        return Err(format!("{} trailing bytes after the metadata", rest.len()));
    }
    Ok(CommittedOffset {
        offset: i64::from_be_bytes(offset),
        leader_epoch: i32::from_be_bytes(leader_epoch),
        metadata: metadata.to_string(),
        commit_timestamp_ms: i64::from_be_bytes(commit_timestamp_ms),
    })
}

/// Decodes a big-endian integer stored in the `meta` column family.
pub(crate) fn decode_meta<const N: usize>(value: &[u8], what: &str) -> Result<[u8; N], String> {
    let (array, rest) = take_array::<N>(value, what)?;
    if !rest.is_empty() {
        return Err(format!("{what} has {} trailing bytes", rest.len()));
    }
    Ok(array)
}

/// The smallest byte string greater than every string starting with `prefix`, or `None` if
/// there is none (the prefix is all `0xFF`).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last != u8::MAX {
            next.push(last + 1);
            return Some(next);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(metadata: &str) -> CommittedOffset {
        CommittedOffset {
            offset: 42,
            leader_epoch: -1,
            metadata: metadata.to_string(),
            commit_timestamp_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_group_prefix_is_not_a_prefix_of_a_longer_group() {
        let a = group_prefix("a").expect("valid input");
        let ab_key = offset_key("ab", "t", 0).expect("valid input");
        assert!(!ab_key.starts_with(&a));
        assert!(offset_key("a", "bt", 0)
            .expect("valid input")
            .starts_with(&a));
    }

    #[test]
    fn keys_round_trip_with_unusual_names() {
        for (group, topic, partition) in [
            ("", "t", 0),
            ("g.r-o_up", "top.ic-1", 7),
            ("grüppe/日本", "тема", i32::MAX),
        ] {
            let key = offset_key(group, topic, partition).expect("valid input");
            assert_eq!(
                decode_offset_key(&key).expect("valid input"),
                (group, topic, partition)
            );
            let (decoded_group, prefix_len) = decode_key_group(&key).expect("valid input");
            assert_eq!(decoded_group, group);
            assert_eq!(
                &key[..prefix_len],
                group_prefix(group).expect("valid input").as_slice()
            );
        }
    }

    #[test]
    fn values_round_trip() {
        for metadata in ["", "some metadata", "ünïcødé"] {
            let value = encode_value(&sample(metadata)).expect("valid input");
            assert_eq!(value[0], VALUE_VERSION_1);
            assert_eq!(decode_value(&value).expect("valid input"), sample(metadata));
        }
    }

    #[test]
    fn truncated_or_padded_input_is_an_error_not_a_panic() {
        let key = offset_key("group", "topic", 3).expect("valid input");
        for len in 0..key.len() {
            assert!(decode_offset_key(&key[..len]).is_err(), "key cut at {len}");
        }
        let mut long = key.clone();
        long.push(0);
        assert!(decode_offset_key(&long).is_err());

        let value = encode_value(&sample("meta")).expect("valid input");
        for len in 0..value.len() {
            assert!(decode_value(&value[..len]).is_err(), "value cut at {len}");
        }
        let mut long = value.clone();
        long.push(0);
        assert!(decode_value(&long).is_err());
    }

    #[test]
    fn unknown_value_version_and_bad_utf8_are_rejected() {
        let mut value = encode_value(&sample("ab")).expect("valid input");
        value[0] = 2;
        assert!(decode_value(&value)
            .expect_err("invalid input")
            .contains("unknown value version 2"));

        let mut key = offset_key("g", "t", 0).expect("valid input");
        key[4] = 0xFF; // the single group byte
        assert!(decode_offset_key(&key)
            .expect_err("invalid input")
            .contains("UTF-8"));
    }

    #[test]
    fn a_huge_length_prefix_does_not_allocate_or_panic() {
        let key = [0xFF, 0xFF, 0xFF, 0xFF, b'a'];
        assert!(decode_key_group(&key).is_err());
    }

    #[test]
    fn prefix_successor_increments_the_last_byte_that_can_be() {
        assert_eq!(
            prefix_successor(&[0, 0, 0, 1, b'a']),
            Some(vec![0, 0, 0, 1, b'b'])
        );
        assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_successor(&[]), None);
    }
}
