"""An idle broker costs (almost) no CPU: a one-node broker with a topic and a consumer group's
worth of internal partitions, no client traffic, stays under 10 % of one core over 3 s. Brook
only: a resource check of the brook process. (A single-node broker once spun a whole core in
its quorum-attachment loop, which has no remote voter to hold; every test on one broker paid
for it on CI's two cores.)"""

import os
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness import paths

WINDOW_S = 3.0
MAX_SHARE = 0.10

pytestmark = pytest.mark.skipif(paths.target() == "kafka", reason="a check of the brook process itself")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_idle_broker_uses_under_a_tenth_of_a_core(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=60)
    time.sleep(1)  # let start-up and the topic's creation settle
    before, started = cpu_seconds(broker.pid), time.monotonic()
    time.sleep(WINDOW_S)
    used = cpu_seconds(broker.pid) - before
    share = used / (time.monotonic() - started)
    assert share < MAX_SHARE, f"idle brook used {used:.2f} CPU-s in {WINDOW_S} s ({share:.0%} of a core)"
