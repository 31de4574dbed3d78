#!/usr/bin/env python3
"""Scripted hand-check of one driver against a running broker (Apache Kafka reference).

    selfcheck.py BOOTSTRAP DRIVER_ARGV...

e.g. (with integration-tests/scripts/kafka-ref.sh 19092 /tmp/kref running)
    KAFKA_LOGS=/tmp/kref/logs drivers/franz/selfcheck.py 127.0.0.1:19092 drivers/franz/franz-driver
    KAFKA_LOGS=/tmp/kref/logs drivers/franz/selfcheck.py 127.0.0.1:19092 node drivers/kafkajs/driver.js
KAFKA_LOGS (optional) also checks the codec id of each stored batch. Exit code 3
(unsupported) is reported as n/a. A developer tool, not part of the pytest suite.

Exercises every driver-protocol command and asserts on the data read back. Exits non-zero
on the first mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile
import uuid

BOOT = sys.argv[1]
DRIVER = sys.argv[2:]
TMP = tempfile.mkdtemp(prefix="drvcheck-")


def run(cmd, *args, ok=True, lines=False):
    p = subprocess.run(DRIVER + [cmd, "--bootstrap", BOOT, *args], capture_output=True, text=True, timeout=120)
    if p.returncode == 3:
        print(f"n/a: {cmd} {' '.join(args)[:80]} -> {p.stdout.strip()}")
        return None
    if ok and p.returncode != 0:
        raise SystemExit(f"FAIL {cmd} {args}: rc={p.returncode}\nstdout={p.stdout[:2000]}\nstderr={p.stderr[-3000:]}")
    if not ok:
        return p
    if lines:
        return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    return json.loads(p.stdout)


def write(name, recs):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return path


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok: {what}")


def topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


results = {}

# --- admin ---
t = topic("adm")
check(run("create-topic", "--topic", t, "--partitions", "3", "--config", "retention.ms=123456") == {"ok": True}, "create-topic")
p = run("create-topic", "--topic", t, "--partitions", "3", ok=False)
check(p.returncode != 0, f"create-topic twice fails (stdout={p.stdout.strip()})")
check(t in run("list-topics")["topics"], "list-topics has the topic")
md = run("metadata")
check(md["topics"][t] == {"partitions": 3} and md["brokers"][0]["id"] == 1 and md["controller_id"] == 1, "metadata")
dt = run("describe-topic", "--topic", t)
check(dt["name"] == t and [x["partition"] for x in dt["partitions"]] == [0, 1, 2]
      and all(x["leader"] == 1 and x["replicas"] == [1] and x["isr"] == [1] for x in dt["partitions"]), f"describe-topic (topic_id={dt.get('topic_id')})")
check(run("create-partitions", "--topic", t, "--total", "5") == {"ok": True}, "create-partitions")
check(len(run("describe-topic", "--topic", t)["partitions"]) == 5, "describe-topic after create-partitions")
cf = run("describe-configs", "--topic", t)["configs"]
check(cf["retention.ms"] == {"value": "123456", "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False}, "describe-configs topic override")
check(cf["cleanup.policy"]["value"] == "delete" and cf["cleanup.policy"]["source"] == "DEFAULT_CONFIG", "describe-configs default")
check(run("alter-configs", "--topic", t, "--set", "segment.ms=100000", "--delete", "retention.ms") == {"ok": True}, "alter-configs")
cf = run("describe-configs", "--topic", t)["configs"]
check(cf["segment.ms"]["value"] == "100000" and cf["retention.ms"] == {"value": "604800000", "source": "DEFAULT_CONFIG", "read_only": False}, "alter-configs is incremental")
bc = run("describe-configs", "--broker", "1")["configs"]
check(bc["log.dirs"]["read_only"] is True and bc["num.io.threads"]["value"] == "8", "describe-configs broker")
check(run("delete-topic", "--topic", t) == {"ok": True}, "delete-topic")
check(run("describe-topic", "--topic", t, ok=False).returncode != 0, "describe-topic of deleted topic fails")

# --- 1000 keyed records, 2 headers, explicit timestamps, 3 partitions ---
t = topic("data")
run("create-topic", "--topic", t, "--partitions", "3")
recs = [{"key": f"key-{i % 37}", "value": f"value-{i}", "headers": [["h1", f"a{i}"], ["h2", "b"]],
         "timestamp": 1700000000000 + i * 1000} for i in range(1000)]
acks = run("produce", "--topic", t, "--input", write("in1000.jsonl", recs), lines=True)
check(len(acks) == 1000 and all(a["offset"] >= 0 for a in acks), "produce 1000: one ack per record")
# same key -> same partition (murmur2, like the Java client)
by_key = {}
for r, a in zip(recs, acks):
    by_key.setdefault(r["key"], set()).add(a["partition"])
check(all(len(s) == 1 for s in by_key.values()), "same key, same partition")
check(len({a["partition"] for a in acks}) == 3, "records spread over the 3 partitions")
got = run("consume", "--topic", t, "--count", "1000", "--from", "earliest", lines=True)
check(len(got) == 1000, f"consume 1000 (got {len(got)})")
sent = {(a["partition"], a["offset"]): r for r, a in zip(recs, acks)}
for g in got:
    r = sent[(g["partition"], g["offset"])]
    if (g["key"], g["value"], g["headers"], g["timestamp"]) != (r["key"], r["value"], r["headers"], r["timestamp"]):
        raise SystemExit(f"FAIL mismatch {g} vs {r}")
check(len({(g['partition'], g['offset']) for g in got}) == 1000, "consumed records identical to produced (key, value, headers, timestamp)")
# per-partition order
for p in range(3):
    offs = [g["offset"] for g in got if g["partition"] == p]
    check(offs == sorted(offs) and offs[0] == 0, f"partition {p} in offset order from 0")

# --- offsets ---
ends = {str(p): len([a for a in acks if a["partition"] == p]) for p in range(3)}
o = run("offsets", "--topic", t, "--spec", "earliest")
check({k: v["offset"] for k, v in o.items()} == {"0": 0, "1": 0, "2": 0}, f"offsets earliest {o}")
o = run("offsets", "--topic", t, "--spec", "latest")
check({k: v["offset"] for k, v in o.items()} == ends, f"offsets latest {o}")
o = run("offsets", "--topic", t, "--spec", "max-timestamp")
exp = {}
for r, a in zip(recs, acks):
    cur = exp.get(str(a["partition"]))
    if cur is None or r["timestamp"] >= cur["timestamp"]:
        exp[str(a["partition"])] = {"offset": a["offset"], "timestamp": r["timestamp"]}
if o is not None:
    check(o == exp, f"offsets max-timestamp {o}")
ts = 1700000000000 + 500 * 1000 + 1  # first record strictly after record 500
exp = {}
for r, a in zip(recs, acks):
    if r["timestamp"] >= ts:
        cur = exp.get(str(a["partition"]))
        if cur is None or a["offset"] < cur["offset"]:
            exp[str(a["partition"])] = {"offset": a["offset"], "timestamp": r["timestamp"]}
o = run("offsets", "--topic", t, "--spec", str(ts))
if all(v["timestamp"] is None for v in o.values()):  # client drops the timestamp
    exp = {k: {"offset": v["offset"], "timestamp": None} for k, v in exp.items()}
check(o == exp, f"offsets by timestamp {o}")
o = run("offsets", "--topic", t, "--spec", str(1800000000000))
print("  info: offsets by a future timestamp ->", o)

# --- consume from an offset, selected partitions ---
got = run("consume", "--topic", t, "--count", "5", "--partitions", "1", "--from", "3", lines=True)
check([g["offset"] for g in got] == [3, 4, 5, 6, 7] and all(g["partition"] == 1 for g in got), "consume --partitions 1 --from 3")
got = run("consume", "--topic", t, "--count", "1", "--from", "latest", "--timeout-ms", "3000", lines=True)
check(got == [], "consume --from latest times out empty")

# --- nulls, explicit partitions ---
t = topic("nulls")
run("create-topic", "--topic", t, "--partitions", "3")
recs = [{"key": None, "value": "v-nullkey"},
        {"key": "k-nullvalue", "value": None, "headers": [["hn", "x"]], "partition": 2},
        {"key": "k", "value": "", "headers": [], "partition": 0, "timestamp": 1600000000000}]
acks = run("produce", "--topic", t, "--input", write("nulls.jsonl", recs), lines=True)
check(acks[1]["partition"] == 2 and acks[2]["partition"] == 0, f"explicit partitions honoured {acks}")
got = run("consume", "--topic", t, "--count", "3", lines=True)
byv = {(g["partition"], g["offset"]): g for g in got}
g1 = byv[(acks[1]["partition"], acks[1]["offset"])]
g0 = byv[(acks[0]["partition"], acks[0]["offset"])]
g2 = byv[(acks[2]["partition"], acks[2]["offset"])]
check(g0["key"] is None and g0["value"] == "v-nullkey", "null key round-trips")
check(g1["value"] is None and g1["headers"] == [["hn", "x"]], "null value round-trips")
check(g2["value"] == "" and g2["timestamp"] == 1600000000000 and g2["headers"] == [], "empty value and old timestamp round-trip")

acks = run("produce", "--topic", t, "--input", write("nullh.jsonl", [{"key": "nh", "value": "v", "headers": [["a", None], ["b", "y"]], "partition": 1}]), lines=True)
if acks is not None:
    got = run("consume", "--topic", t, "--partitions", "1", "--from", str(acks[0]["offset"]), "--count", "1", lines=True)
    check(got[0]["headers"] == [["a", None], ["b", "y"]], "null header value round-trips")

# --- codecs ---
for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    t = topic("codec-" + codec)
    run("create-topic", "--topic", t, "--partitions", "1")
    recs = [{"key": f"k{i}", "value": ("payload-%d-" % i) * 20, "headers": [["c", codec]], "timestamp": 1700000000000 + i} for i in range(200)]
    acks = run("produce", "--topic", t, "--input", write(f"c-{codec}.jsonl", recs), "--codec", codec, lines=True)
    got = run("consume", "--topic", t, "--count", "200", lines=True)
    check([a["offset"] for a in acks] == list(range(200)) and [(g["key"], g["value"], g["headers"], g["timestamp"]) for g in got]
          == [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in recs], f"codec {codec} round-trip")
    logs = os.environ.get("KAFKA_LOGS")
    if logs:
        import glob, struct
        seg = sorted(glob.glob(os.path.join(logs, t + "-0", "*.log")))[0]
        with open(seg, "rb") as f:
            head = f.read(23)
        attrs = struct.unpack(">h", head[21:23])[0]
        want = ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
        check(attrs & 7 == want, f"codec {codec}: the stored batch says codec id {attrs & 7}")

# --- acks ---
for a in ["1", "0", "all"]:
    t = topic("acks")
    run("create-topic", "--topic", t, "--partitions", "1")
    recs = [{"key": "k", "value": f"v{i}"} for i in range(10)]
    acks = run("produce", "--topic", t, "--input", write("acks.jsonl", recs), "--acks", a, lines=True)
    exp = [-1] * 10 if a == "0" else list(range(10))
    got = run("consume", "--topic", t, "--count", "10", lines=True)
    check([x["offset"] for x in acks] == exp and [g["value"] for g in got] == [r["value"] for r in recs], f"acks={a}")
t = topic("idem")
run("create-topic", "--topic", t, "--partitions", "1")
acks = run("produce", "--topic", t, "--input", write("idem.jsonl", [{"key": "k", "value": f"v{i}"} for i in range(10)]), "--idempotent", lines=True)
check([x["offset"] for x in acks] == list(range(10)), "--idempotent")

# --- a 900 KB value, and --max-request-size below it ---
t = topic("big")
run("create-topic", "--topic", t, "--partitions", "1")
big = [{"key": "big", "value": "x" * 900_000}]
acks = run("produce", "--topic", t, "--input", write("big.jsonl", big), "--codec", "none", lines=True)
check(acks == [{"partition": 0, "offset": 0}], "produce 900 KB value")
got = run("consume", "--topic", t, "--count", "1", lines=True)
check(len(got) == 1 and got[0]["value"] == big[0]["value"], "consume 900 KB value")
got = run("consume", "--topic", t, "--count", "1", "--max-bytes", "1024", lines=True)
check(len(got) == 1 and got[0]["value"] == big[0]["value"], "consume 900 KB value with --max-bytes 1024 (KIP-74: first batch always returned)")
p = run("produce", "--topic", t, "--input", write("big2.jsonl", big), "--codec", "none", "--max-request-size", "100000", ok=False)
check(p is None or p.returncode != 0, f"--max-request-size 100000 refuses a 900 KB record (stdout={p and p.stdout.strip()[:200]})")
print("ALL OK")
