"""The consumer-group soak, short version (issue 4): 5 groups x 4 members of mixed clients
(franz-go, Java, confluent-kafka, kafkajs, kafka-python in the range groups; franz-go, Java,
confluent-kafka in the cooperative-sticky ones) join, leave and get killed for
BROOK_SOAK_DURATION seconds (default 60, a membership change every 2 s: the 29 changes the
earlier 90 s at one per 3 s made) under a steady idempotent producer; every group must
read every acknowledged record (lost = 0), intact, with duplicates only where a reader was
killed or a commit failed, and every client must have read its share. `make soak` runs the long
version (soak/run.py). Also passes against Apache Kafka (BROOK_TEST_TARGET=kafka)."""

import io
import os

import pytest

from soak.run import ALL_CLIENTS, print_summary, soak

DURATION_S = float(os.environ.get("BROOK_SOAK_DURATION", "60"))
CHURN_S = 2.0  # soak/run.py's default (make soak) is 3 s: 200 changes in 600 s


@pytest.mark.timeout(DURATION_S + 400)
def test_five_groups_with_churning_members_each_read_every_produced_record(broker):
    result = soak(broker.bootstrap, DURATION_S, churn_s=CHURN_S, log=lambda line: print(line, flush=True),
                  metrics_url=broker.metrics_url)
    summary = io.StringIO()
    print_summary(result, summary)
    print(summary.getvalue())
    assert result["produce_errors"] == []
    assert result["produced"] >= DURATION_S * 100, summary.getvalue()
    for g in result["groups"]:
        assert g["lost"] == 0, summary.getvalue()
        assert g["mismatched"] == 0 and g["unexpected_reads"] == 0, summary.getvalue()
        assert g["unexplained_duplicates"] == 0, summary.getvalue()
        assert g["failed_members"] == [], g
    churned = {k: sum(g[k] for g in result["groups"]) for k in ("left", "killed", "rebalances")}
    assert all(churned.values()), churned
    consumed = {c: result["by_client"].get(c, {}).get("consumed", 0) for c in ALL_CLIENTS}
    assert all(consumed.values()), f"every client reads its share: {consumed}"
