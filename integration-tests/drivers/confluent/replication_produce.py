#!/usr/bin/env python3
"""`produce-paced` with confluent-kafka (librdkafka), for the replication tests
(test_replication_*.py, harness/replication.py; the protocol is described there):

    replication_produce.py produce-paced --bootstrap B --topic T --input FILE [--acks all|1|0]
        [--idempotent] [--interval-ms 10] [--retries N] [--request-timeout-ms MS] [--delivery-timeout-ms MS]

Records are sent one by one, interval-ms apart, by one Producer; each delivery report is printed
as it arrives: {"index":I,"partition":P,"offset":O} or {"index":I,"error":"NOT_ENOUGH_REPLICAS",..}.
"""

import argparse
import json
import sys
import time

from confluent_kafka import Producer


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
    conf = {"bootstrap.servers": a.bootstrap, "acks": "all" if a.acks in ("all", "-1") else a.acks,
            "enable.idempotence": a.idempotent, "linger.ms": 0}
    if a.retries is not None:
        conf["message.send.max.retries"] = a.retries
    if a.request_timeout_ms is not None:
        conf["request.timeout.ms"] = a.request_timeout_ms
    if a.delivery_timeout_ms is not None:
        conf["message.timeout.ms"] = a.delivery_timeout_ms
    producer = Producer(conf)
    with open(a.input) as f:
        records = [json.loads(line) for line in f if line.strip()]

    def report(index):
        def callback(err, msg):
            if err is not None:
                line = {"index": index, "error": err.name(), "message": err.str()}
            else:
                line = {"index": index, "partition": msg.partition(), "offset": msg.offset() if msg.offset() >= 0 else -1}
            print(json.dumps(line), flush=True)
        return callback

    for index, r in enumerate(records):
        kwargs = {"value": None if r.get("value") is None else r["value"].encode(),
                  "key": None if r.get("key") is None else r["key"].encode(), "on_delivery": report(index)}
        if r.get("partition") is not None:
            kwargs["partition"] = int(r["partition"])
        producer.produce(a.topic, **kwargs)
        deadline = time.monotonic() + a.interval_ms / 1000
        producer.poll(a.interval_ms / 1000)
        while time.monotonic() < deadline:
            producer.poll(max(0.0, deadline - time.monotonic()))
    while len(producer) > 0:
        producer.poll(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
