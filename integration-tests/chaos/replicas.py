"""Compare the replicas of each partition on disk: the batch headers of every segment file.

Brook and Kafka store a partition as `<log dir>/<topic>-<partition>/<base offset>.log` segment
files of v2 record batches (storage/FORMAT.md; Kafka's DefaultRecordBatch). Each batch header
starts with baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32,
attributes i16, lastOffsetDelta i32 (big-endian). A follower stores its leader's batches as
they are, so below the high watermark every replica must hold the same batches: the same
(base offset, last offset, leader epoch, CRC-32C) sequence, whatever the segment boundaries.
A torn tail (a batch running past the end of the file) ends a file's listing.
"""

import struct
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HEADER = struct.Struct(">qiibIhi")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
Batch = Tuple[int, int, int, int]  # (base offset, last offset, leader epoch, crc)


def segment_batches(path: Path) -> List[Batch]:
    data = path.read_bytes()
    out: List[Batch] = []
    pos = 0
    while pos + HEADER.size <= len(data):
        base, length, epoch, magic, crc, _attrs, last_delta = HEADER.unpack_from(data, pos)
        if length < HEADER.size - 12 or pos + 12 + length > len(data) or magic != 2:
            break
        out.append((base, base + last_delta, epoch, crc))
        pos += 12 + length
    return out


def partition_batches(log_dir: Path, topic: str, partition: int) -> List[Batch]:
    """Every batch of one replica, in offset order (segments sorted by base offset)."""
    d = Path(log_dir) / f"{topic}-{partition}"
    if not d.is_dir():
        return []
    batches: List[Batch] = []
    for seg in sorted(d.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        batches.extend(segment_batches(seg))
    return batches


def compare(log_dirs: Dict[int, Path], topic: str, high_watermarks: Dict[int, int],
            replica_sets: Optional[Dict[int, List[int]]] = None) -> dict:
    """For each partition, each replica's batches ending below the partition's high watermark must
    be the same list, and cover every offset below it. Returns {"partitions": n,
    "replicas_compared": n, "batches_compared": n, "stale_copies": [..], "mismatches": [..]}.

    `replica_sets` ({partition: replica ids}, the partitions' *current* assignment, e.g. after
    reassignments): only those nodes are compared, a listed node without the partition's
    directory is a mismatch, and a directory on a node outside the set (a moved-away copy that
    is pending deletion, or one its broker has not yet found stray) is only listed in
    "stale_copies". Without it, a node without the partition's directory is not a replica and is
    skipped."""
    mismatches, stale = [], []
    replicas = batches_compared = 0
    for p, hw in sorted(high_watermarks.items()):
        lists = {}
        members = None if replica_sets is None or p not in replica_sets else set(replica_sets[p])
        for node_id, log_dir in sorted(log_dirs.items()):
            present = (Path(log_dir) / f"{topic}-{p}").is_dir()
            if members is not None and node_id not in members:
                if present:
                    stale.append({"partition": p, "node": node_id})
                continue
            if not present:
                if members is not None:
                    mismatches.append({"partition": p, "node": node_id, "problem": "replica directory missing"})
                continue
            lists[node_id] = [b for b in partition_batches(log_dir, topic, p) if b[1] < hw]
        replicas += len(lists)
        if not lists:
            mismatches.append({"partition": p, "problem": "no replica directory found"})
            continue
        reference_node = max(lists, key=lambda n: len(lists[n]))
        reference = lists[reference_node]
        batches_compared += len(reference) * len(lists)
        for node_id, batches in lists.items():
            covered_to = batches[-1][1] + 1 if batches else None
            if covered_to is not None and covered_to != hw and hw > 0:
                mismatches.append({"partition": p, "node": node_id, "problem": "does not reach the high watermark",
                                   "last_offset_below_hw": covered_to - 1, "high_watermark": hw})
            if batches != reference[len(reference) - len(batches):] and batches != reference[:len(batches)]:
                first = next((i for i, (a, b) in enumerate(zip(batches, reference)) if a != b), None)
                mismatches.append({"partition": p, "node": node_id, "problem": "batches differ",
                                   "reference_node": reference_node,
                                   "first_difference": None if first is None else
                                   {"node": batches[first], "reference": reference[first]}})
            elif len(batches) != len(reference):
                mismatches.append({"partition": p, "node": node_id, "problem": "fewer batches below the high watermark",
                                   "batches": len(batches), "reference_batches": len(reference),
                                   "reference_node": reference_node})
    return {"partitions": len(high_watermarks), "replicas_compared": replicas, "batches_compared": batches_compared,
            "stale_copies": stale, "mismatches": mismatches}
