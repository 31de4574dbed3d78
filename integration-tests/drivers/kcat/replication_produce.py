#!/usr/bin/env python3
"""`produce-paced` with kcat, for the replication tests (test_replication_*.py,
harness/replication.py; the protocol is described there):

    replication_produce.py produce-paced --bootstrap B --topic T --input FILE [--acks all|1|0]
        [--idempotent] [--interval-ms 10] [--retries N] [--request-timeout-ms MS] [--delivery-timeout-ms MS]

ONE `kcat -P` process (so one producer id with --idempotent) is fed the records on stdin,
interval-ms apart (value only, -D with an ASCII separator; -p when the record names a
partition, the first record's partition for all). kcat prints no offsets on stdout, but at
verbosity 3 its delivery-report callback logs "Message delivered to partition P (offset O)" or
"Delivery failed for message: <error>" on stderr; the N-th report is printed as the result of
record N-1 (kcat reports in send order within a partition for an idempotent producer; the tests
check each reported offset against the value read back there).
"""

import argparse
import json
import re
import subprocess
import sys
import threading
import time

DELIVERED = re.compile(r"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")
FAILED = re.compile(r"Delivery failed for message: (.*)")
MSG_SEP = "\x1e"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["produce-paced"])
    for name in ("--bootstrap", "--topic", "--input"):
        p.add_argument(name, required=True)
    p.add_argument("--acks", default="all")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--interval-ms", type=int, default=10)
    p.add_argument("--retries", type=int)
    p.add_argument("--request-timeout-ms", type=int)
    p.add_argument("--delivery-timeout-ms", type=int)
    a = p.parse_args()
    with open(a.input) as f:
        records = [json.loads(line) for line in f if line.strip()]
    argv = ["kcat", "-b", a.bootstrap, "-P", "-t", a.topic, "-D", "\\x1e", "-Z", "-v", "-v", "-v",
            "-X", f"acks={'all' if a.acks in ('all', '-1') else a.acks}", "-X", "linger.ms=0"]
    if records and records[0].get("partition") is not None:
        argv += ["-p", str(records[0]["partition"])]
    if a.idempotent:
        argv += ["-X", "enable.idempotence=true"]
    if a.retries is not None:
        argv += ["-X", f"message.send.max.retries={a.retries}"]
    if a.request_timeout_ms is not None:
        argv += ["-X", f"request.timeout.ms={a.request_timeout_ms}"]
    if a.delivery_timeout_ms is not None:
        argv += ["-X", f"message.timeout.ms={a.delivery_timeout_ms}"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    reported = [0]

    def read_reports():
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            ok, failed = DELIVERED.search(line), FAILED.search(line)
            if ok:
                doc = {"index": reported[0], "partition": int(ok.group(1)), "offset": int(ok.group(2))}
            elif failed:
                doc = {"index": reported[0], "error": failed.group(1).strip(), "message": line.strip()}
            else:
                sys.stderr.write(line)
                continue
            reported[0] += 1
            print(json.dumps(doc), flush=True)

    reader = threading.Thread(target=read_reports, daemon=True)
    reader.start()
    for r in records:
        proc.stdin.write(((r.get("value") or "") + MSG_SEP).encode())
        proc.stdin.flush()
        time.sleep(a.interval_ms / 1000)
    proc.stdin.close()
    proc.wait()
    reader.join(10)
    return 0 if reported[0] == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
