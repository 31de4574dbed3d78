#!/usr/bin/env python3
"""`produce-paced` with kafka-python, for the replication tests (test_replication_*.py,
harness/replication.py; the protocol is described there):

    replication_produce.py produce-paced --bootstrap B --topic T --input FILE [--acks all|1|0]
        [--idempotent] [--interval-ms 10] [--retries N] [--request-timeout-ms MS] [--delivery-timeout-ms MS]

Records are sent one by one, interval-ms apart, by one KafkaProducer; each result is printed as it
arrives: {"index":I,"partition":P,"offset":O} or {"index":I,"error":"NOT_ENOUGH_REPLICAS",..}.
"""

import argparse
import json
import sys
import threading
import time

from kafka import KafkaProducer

_OUT = threading.Lock()


def emit(line: dict) -> None:
    with _OUT:
        print(json.dumps(line), flush=True)


def error_name(exc) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message.isupper() else type(exc).__name__


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
    conf = {"bootstrap_servers": a.bootstrap, "acks": {"all": "all", "-1": "all", "1": 1, "0": 0}[a.acks],
            "enable_idempotence": a.idempotent, "linger_ms": 0}
    if a.retries is not None:
        conf["retries"] = a.retries
    if a.request_timeout_ms is not None:
        conf["request_timeout_ms"] = a.request_timeout_ms
    if a.delivery_timeout_ms is not None:
        conf["delivery_timeout_ms"] = a.delivery_timeout_ms
    producer = KafkaProducer(**conf)
    with open(a.input) as f:
        records = [json.loads(line) for line in f if line.strip()]
    futures = []
    for index, r in enumerate(records):
        fut = producer.send(a.topic, value=None if r.get("value") is None else r["value"].encode(),
                            key=None if r.get("key") is None else r["key"].encode(), partition=r.get("partition"))
        fut.add_callback(lambda md, i=index: emit({"index": i, "partition": md.partition,
                                                  "offset": md.offset if md.offset >= 0 else -1}))
        fut.add_errback(lambda e, i=index: emit({"index": i, "error": error_name(e), "message": str(e)}))
        futures.append(fut)
        time.sleep(a.interval_ms / 1000)
    producer.flush()
    producer.close(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
