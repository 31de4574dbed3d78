//! Behaviour of the RocksDB consumer-offset store through its public API, including
//! durability across reopen and refusal of unknown on-disk format versions.

use std::collections::BTreeMap;
use std::path::Path;

use brook_storage::offsets::{CommittedOffset, OffsetStore, OFFSET_STORE_FORMAT_VERSION};
use brook_storage::StorageError;
use proptest::prelude::*;

fn committed(offset: i64, commit_timestamp_ms: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 3,
        metadata: format!("m{offset}"),
        commit_timestamp_ms,
    }
}

fn entry(topic: &str, partition: i32, offset: i64, ts: i64) -> (String, i32, CommittedOffset) {
    (topic.to_string(), partition, committed(offset, ts))
}

fn open(dir: &Path) -> OffsetStore {
    OffsetStore::open(dir).expect("open offset store")
}

#[test]
fn commits_round_trip_per_group_even_when_group_names_share_a_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .commit("a", &[entry("t", 0, 10, 1), entry("t", 1, 11, 1)])
        .expect("commit a");
    store
        .commit("ab", &[entry("t", 0, 20, 1)])
        .expect("commit ab");
    store
        .commit("", &[entry("t", 0, 30, 1)])
        .expect("commit empty group");

    assert_eq!(
        store.fetch("a").expect("fetch a"),
        vec![entry("t", 0, 10, 1), entry("t", 1, 11, 1)]
    );
    assert_eq!(
        store.fetch("ab").expect("fetch ab"),
        vec![entry("t", 0, 20, 1)]
    );
    assert_eq!(
        store.fetch("").expect("fetch empty"),
        vec![entry("t", 0, 30, 1)]
    );
    assert_eq!(store.fetch("abc").expect("fetch unknown"), vec![]);
}

#[test]
fn fetch_sorts_by_topic_name_then_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    // "zz" is shorter than "aaa": key order alone would put it first.
    store
        .commit(
            "g",
            &[
                entry("zz", 0, 1, 1),
                entry("aaa", 10, 2, 1),
                entry("aaa", 2, 3, 1),
                entry("b", 0, 4, 1),
            ],
        )
        .expect("commit");
    let order: Vec<(String, i32)> = store
        .fetch("g")
        .expect("fetch")
        .into_iter()
        .map(|(t, p, _)| (t, p))
        .collect();
    let expected = [("aaa", 2), ("aaa", 10), ("b", 0), ("zz", 0)];
    assert_eq!(order, expected.map(|(t, p)| (t.to_string(), p)).to_vec());
}

#[test]
fn a_later_commit_overwrites_the_earlier_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store.commit("g", &[entry("t", 0, 5, 1)]).expect("first");
    store.commit("g", &[entry("t", 0, 9, 2)]).expect("second");
    assert_eq!(store.fetch("g").expect("fetch"), vec![entry("t", 0, 9, 2)]);
}

#[test]
fn delete_offsets_removes_only_the_named_partitions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .commit(
            "g",
            &[
                entry("t", 0, 1, 1),
                entry("t", 1, 2, 1),
                entry("u", 0, 3, 1),
            ],
        )
        .expect("commit");
    store
        .commit("g2", &[entry("t", 0, 4, 1)])
        .expect("commit g2");
    store
        .delete_offsets("g", &[("t".to_string(), 0), ("absent".to_string(), 7)])
        .expect("delete");
    assert_eq!(
        store.fetch("g").expect("fetch"),
        vec![entry("t", 1, 2, 1), entry("u", 0, 3, 1)]
    );
    assert_eq!(
        store.fetch("g2").expect("fetch g2"),
        vec![entry("t", 0, 4, 1)]
    );
}

#[test]
fn delete_group_removes_metadata_and_offsets_but_not_other_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store.put_group("a", b"meta-a").expect("put a");
    store.commit("a", &[entry("t", 0, 1, 1)]).expect("commit a");
    store.put_group("ab", b"meta-ab").expect("put ab");
    store
        .commit("ab", &[entry("t", 0, 2, 1)])
        .expect("commit ab");

    store.delete_group("a").expect("delete a");
    assert_eq!(store.get_group("a").expect("get a"), None);
    assert_eq!(store.fetch("a").expect("fetch a"), vec![]);
    assert_eq!(
        store.get_group("ab").expect("get ab"),
        Some(b"meta-ab".to_vec())
    );
    assert_eq!(
        store.fetch("ab").expect("fetch ab"),
        vec![entry("t", 0, 2, 1)]
    );
    assert_eq!(store.list_groups().expect("list"), vec!["ab".to_string()]);
}

#[test]
fn list_groups_includes_groups_with_only_metadata_or_only_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    assert_eq!(
        store.list_groups().expect("list empty"),
        Vec::<String>::new()
    );
    store.put_group("meta-only", b"x").expect("put");
    store
        .commit("offsets-only", &[entry("t", 0, 1, 1), entry("t", 1, 1, 1)])
        .expect("commit");
    store.put_group("both", b"y").expect("put both");
    store
        .commit("both", &[entry("t", 0, 1, 1)])
        .expect("commit both");
    store.commit("b", &[entry("t", 0, 1, 1)]).expect("commit b");
    assert_eq!(
        store.list_groups().expect("list"),
        ["b", "both", "meta-only", "offsets-only"]
            .map(String::from)
            .to_vec()
    );
}

#[test]
fn expire_offsets_removes_only_commits_older_than_the_cutoff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    store
        .commit(
            "g",
            &[
                entry("t", 0, 1, 100),
                entry("t", 1, 2, 200),
                entry("t", 2, 3, 300),
            ],
        )
        .expect("commit");
    store
        .commit("other", &[entry("t", 0, 4, 100)])
        .expect("commit other");

    assert_eq!(store.expire_offsets("g", 200).expect("expire"), 1);
    assert_eq!(
        store.fetch("g").expect("fetch"),
        vec![entry("t", 1, 2, 200), entry("t", 2, 3, 300)]
    );
    assert_eq!(store.expire_offsets("g", 200).expect("expire again"), 0);
    assert_eq!(store.expire_offsets("g", i64::MAX).expect("expire all"), 2);
    assert_eq!(store.fetch("g").expect("fetch after"), vec![]);
    assert_eq!(store.fetch("other").expect("other untouched").len(), 1);
}

#[test]
fn everything_survives_closing_and_reopening_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = open(dir.path());
        store
            .commit("g", &[entry("t", 0, 7, 1), entry("t", 1, 8, 1)])
            .expect("commit");
        store.put_group("g", b"\x00\x01binary").expect("put");
        store
            .commit("gone", &[entry("t", 0, 1, 1)])
            .expect("commit gone");
        store.delete_group("gone").expect("delete gone");
        store.apply(0, &[], 1234).expect("position");
    }
    let store = open(dir.path());
    assert_eq!(
        store.fetch("g").expect("fetch"),
        vec![entry("t", 0, 7, 1), entry("t", 1, 8, 1)]
    );
    assert_eq!(
        store.get_group("g").expect("get"),
        Some(b"\x00\x01binary".to_vec())
    );
    assert_eq!(store.list_groups().expect("list"), vec!["g".to_string()]);
    assert_eq!(store.applied_position_of(0).expect("position"), Some(1234));
}

#[test]
fn applied_position_starts_absent_and_keeps_the_latest_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    assert_eq!(store.applied_position_of(0).expect("initial"), None);
    store.apply(0, &[], 5).expect("set");
    store.apply(0, &[], -1).expect("set again");
    assert_eq!(store.applied_position_of(0).expect("read"), Some(-1));
}

#[test]
fn a_store_with_an_unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path()));
    {
        // Rewrite `meta/format_version` as a future build would (layout in FORMAT.md).
        let db = rocksdb::DB::open_cf(
            &rocksdb::Options::default(),
            dir.path(),
            ["offsets", "groups", "meta", "group_records"],
        )
        .expect("raw open");
        let meta = db.cf_handle("meta").expect("meta cf");
        db.put_cf(meta, b"format_version", 99u32.to_be_bytes())
            .expect("write version");
    }
    match OffsetStore::open(dir.path()) {
        Err(StorageError::UnsupportedOffsetStoreFormat {
            found, supported, ..
        }) => assert_eq!((found, supported), (99, OFFSET_STORE_FORMAT_VERSION)),
        other => panic!("expected UnsupportedOffsetStoreFormat, got {other:?}"),
    }
}

#[test]
fn a_corrupt_value_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = open(dir.path());
        store.commit("g", &[entry("t", 0, 1, 1)]).expect("commit");
    }
    {
        let db = rocksdb::DB::open_cf(
            &rocksdb::Options::default(),
            dir.path(),
            ["offsets", "groups", "meta", "group_records"],
        )
        .expect("raw open");
        let offsets = db.cf_handle("offsets").expect("offsets cf");
        let key: Vec<u8> = [
            &1u32.to_be_bytes()[..],
            b"g",
            &1u32.to_be_bytes(),
            b"t",
            &0i32.to_be_bytes(),
        ]
        .concat();
        assert!(
            db.get_cf(offsets, &key).expect("get").is_some(),
            "key layout as documented"
        );
        db.put_cf(offsets, &key, [1u8, 2, 3]).expect("corrupt");
    }
    let store = open(dir.path());
    assert!(matches!(
        store.fetch("g"),
        Err(StorageError::OffsetStoreCodec { .. })
    ));
}

#[test]
fn unusual_group_and_topic_names_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let names = ["my.group-1_x", "grüppe 日本 🚀", "with\0nul", "-", "."];
    for (i, group) in names.iter().enumerate() {
        let topic = format!("{group}.topic-{i}");
        store
            .commit(group, &[(topic.clone(), i as i32, committed(i as i64, 1))])
            .expect("commit");
        store.put_group(group, group.as_bytes()).expect("put");
    }
    for (i, group) in names.iter().enumerate() {
        let topic = format!("{group}.topic-{i}");
        assert_eq!(
            store.fetch(group).expect("fetch"),
            vec![(topic, i as i32, committed(i as i64, 1))]
        );
        assert_eq!(
            store.get_group(group).expect("get"),
            Some(group.as_bytes().to_vec())
        );
    }
    let mut expected: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(store.list_groups().expect("list"), expected);
}

#[tokio::test]
async fn async_callers_use_the_blocking_pool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = OffsetStore::open_async(dir.path().to_path_buf())
        .await
        .expect("open");
    store
        .run_blocking(|s| s.commit("g", &[entry("t", 0, 1, 1)]))
        .await
        .expect("commit");
    let fetched = store.run_blocking(|s| s.fetch("g")).await.expect("fetch");
    assert_eq!(fetched, vec![entry("t", 0, 1, 1)]);
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Op {
    Commit(usize, Vec<(usize, i32, i64, i64)>),
    Delete(usize, Vec<(usize, i32)>),
    DeleteGroup(usize),
    PutGroup(usize, u8),
    Expire(usize, i64),
    Reopen,
}

// Overlapping names on purpose: prefixes of each other, dots and dashes.
const GROUPS: [&str; 4] = ["a", "ab", "a.b", "b"];
const TOPICS: [&str; 3] = ["t", "t-1", "tt"];

fn op() -> impl Strategy<Value = Op> {
    let g = 0..GROUPS.len();
    let tp = (0..TOPICS.len(), 0..3i32);
    prop_oneof![
        4 => (g.clone(), prop::collection::vec((tp.clone(), 0..100i64, 0..10i64), 0..4))
            .prop_map(|(g, es)| Op::Commit(g, es.into_iter().map(|((t, p), o, ts)| (t, p, o, ts)).collect())),
        1 => (g.clone(), prop::collection::vec(tp, 0..3)).prop_map(|(g, ps)| Op::Delete(g, ps)),
        1 => g.clone().prop_map(Op::DeleteGroup),
        1 => (g.clone(), any::<u8>()).prop_map(|(g, b)| Op::PutGroup(g, b)),
        1 => (g, 0..12i64).prop_map(|(g, c)| Op::Expire(g, c)),
        1 => Just(Op::Reopen),
    ]
}

type Model = BTreeMap<&'static str, (Option<Vec<u8>>, BTreeMap<(String, i32), CommittedOffset>)>;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn the_store_behaves_like_a_btreemap(ops in prop::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = open(dir.path());
        let mut model = Model::new();
        for op in ops {
            match op {
                Op::Commit(g, es) => {
                    let entries: Vec<_> = es
                        .iter()
                        .map(|&(t, p, o, ts)| (TOPICS[t].to_string(), p, committed(o, ts)))
                        .collect();
                    store.commit(GROUPS[g], &entries).expect("commit");
                    let offsets = &mut model.entry(GROUPS[g]).or_default().1;
                    for (t, p, c) in entries {
                        offsets.insert((t, p), c);
                    }
                }
                Op::Delete(g, ps) => {
                    let parts: Vec<_> = ps.iter().map(|&(t, p)| (TOPICS[t].to_string(), p)).collect();
                    store.delete_offsets(GROUPS[g], &parts).expect("delete");
                    if let Some((_, offsets)) = model.get_mut(GROUPS[g]) {
                        for part in parts {
                            offsets.remove(&part);
                        }
                    }
                }
                Op::DeleteGroup(g) => {
                    store.delete_group(GROUPS[g]).expect("delete group");
                    model.remove(GROUPS[g]);
                }
                Op::PutGroup(g, b) => {
                    store.put_group(GROUPS[g], &[b]).expect("put group");
                    model.entry(GROUPS[g]).or_default().0 = Some(vec![b]);
                }
                Op::Expire(g, cutoff) => {
                    let removed = store.expire_offsets(GROUPS[g], cutoff).expect("expire");
                    let mut expected = 0;
                    if let Some((_, offsets)) = model.get_mut(GROUPS[g]) {
                        let before = offsets.len();
                        offsets.retain(|_, c| c.commit_timestamp_ms >= cutoff);
                        expected = before - offsets.len();
                    }
                    prop_assert_eq!(removed, expected);
                }
                Op::Reopen => {
                    drop(store);
                    store = open(dir.path());
                }
            }
            model.retain(|_, (meta, offsets)| meta.is_some() || !offsets.is_empty());
        }
        for group in GROUPS {
            let (meta, offsets) = model.get(group).cloned().unwrap_or_default();
            let expected: Vec<_> = offsets.into_iter().map(|((t, p), c)| (t, p, c)).collect();
            prop_assert_eq!(store.fetch(group).expect("fetch"), expected);
            prop_assert_eq!(store.get_group(group).expect("get"), meta);
        }
        let listed: Vec<String> = model.keys().map(|g| g.to_string()).collect();
        prop_assert_eq!(store.list_groups().expect("list"), listed);
    }
}
