//! The cleaner's key → latest offset map (Kafka's `SkimpyOffsetMap`), bounded by a
//! memory budget (`log.cleaner.dedupe.buffer.size`).
//!
//! Kafka stores a 16-byte MD5 of each key and accepts rare collisions; this map stores
//! the key bytes themselves in a std `HashMap` (SipHash, resistant to crafted keys), so
//! it never confuses two keys. Each entry is charged its key length plus a fixed
//! overhead; when the budget is spent `put` refuses and the cleaner cleans only up to
//! the batch that did not fit, as Kafka does.

use std::collections::HashMap;

/// Bytes charged per entry on top of the key: the boxed slice, the offset and the
/// hash table's own slot, roughly.
const ENTRY_OVERHEAD: usize = 48;

/// Key → highest offset seen, within a byte budget.
#[derive(Debug)]
pub(crate) struct OffsetMap {
    map: HashMap<Box<[u8]>, i64>,
    used: usize,
    budget: usize,
}

impl OffsetMap {
    pub fn new(budget: usize) -> Self {
        OffsetMap {
            map: HashMap::new(),
            used: 0,
            budget,
        }
    }

    /// Records `key` at `offset` (offsets arrive in increasing order). Returns false,
    /// changing nothing, when a new key would exceed the budget.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if let Some(existing) = self.map.get_mut(key) {
            *existing = offset;
        } else {
            let cost = key.len() + ENTRY_OVERHEAD;
            if self.used + cost > self.budget {
                return false;
            }
            self.used += cost;
            self.map.insert(key.into(), offset);
        }
        true
    }

    /// Whether `keys` new keys totalling `key_bytes` would still fit.
    pub fn has_room_for(&self, keys: usize, key_bytes: usize) -> bool {
        self.used + key_bytes + keys * ENTRY_OVERHEAD <= self.budget
    }

    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).copied()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_offset_per_key_wins() {
        let mut map = OffsetMap::new(1 << 20);
        assert!(map.put(b"a", 1));
        assert!(map.put(b"b", 2));
        assert!(map.put(b"a", 3));
        assert_eq!(map.get(b"a"), Some(3));
        assert_eq!(map.get(b"b"), Some(2));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn a_full_map_refuses_new_keys_but_updates_known_ones() {
        let mut map = OffsetMap::new(2 * (ENTRY_OVERHEAD + 1));
        assert!(map.put(b"a", 0));
        assert!(map.put(b"b", 1));
        assert!(!map.has_room_for(1, 1));
        assert!(map.has_room_for(0, 0));
        assert!(!map.put(b"c", 2));
        assert!(map.put(b"a", 3));
        assert_eq!(map.get(b"a"), Some(3));
    }
}
