"""franz-go's own integration test TestTxnEtl (franz-go v1.22.3, pkg/kgo) against the 3-node cluster
(issue 29 §1).

The test as franz-go's authors run it (harness/franz_kgo.py; `go test -run TestTxnEtl`,
KGO_SEEDS = the three nodes, KGO_TEST_RF=1, 20,000 records instead of 500,000): a transactional
producer writes the records in transactions of 10,000; per subtest three groups chain them
through three topics with GroupTransactSession members (each its own transactional id,
read_committed, abort on revoke) joining and leaving, and franz-go checks every record arrives
exactly once and in order. The subtests with classic groups (range, cooperative-sticky,
cooperative-sticky with static members) and the KIP-848 ones (range, sticky, sticky static:
the members' TxnOffsetCommits into a consumer group, at a member epoch a heartbeat may already
have moved on, as Kafka 4.4 accepts them for partitions held since that epoch) must pass, with
the consumer protocol enabled as Kafka's default enables it. Internal
topics at replication factor 1 as in Kafka's shipped server.properties; both targets at
test_transactions.py's transaction.version (2: Transactions V2). The go test output is kept in
the test's temp dir and its failure lines are the assertion message.

Fails on brook before the fix of issue 29 §1 (PRODUCER_FENCED, duplicates); passes against
Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""

import re

import pytest

from harness import franz_kgo
from test_transactions import TXN_VERSION, set_kafka_transaction_version

CLUSTER_OVERRIDES = {**franz_kgo.CLUSTER_OVERRIDES, "group.coordinator.rebalance.protocols": "classic,consumer"}
RECORDS = 20000
GO_TEST_TIMEOUT_S = 240
CLASSIC = ["TestTxnEtl/range", "TestTxnEtl/cooperative-sticky", "TestTxnEtl/cooperative-sticky/static"]
KIP_848 = ["TestTxnEtl/range/848", "TestTxnEtl/sticky/848", "TestTxnEtl/sticky/848/static"]


@pytest.mark.timeout(GO_TEST_TIMEOUT_S + 120)
def test_franz_go_txn_etl_passes_against_three_nodes(cluster, tmp_path):
    if cluster.kind == "kafka":
        set_kafka_transaction_version(cluster.node(1), TXN_VERSION)
    log = tmp_path / "go-test.log"
    code = franz_kgo.run_go_test(cluster.bootstrap, "^TestTxnEtl$", RECORDS, "info", GO_TEST_TIMEOUT_S, log)
    output = log.read_text(errors="replace")
    results = franz_kgo.results(output)
    failures = "\n".join(line for line in output.splitlines()
                         if re.search(r"_test\.go:\d+: |^\s*--- FAIL|^panic:", line))[:6000]
    print(f"go test exit {code}; {results}; output {log}")
    assert code == 0 and results.get("TestTxnEtl") == "PASS", \
        f"go test exit {code}, results {results}; output {log}; failure lines:\n{failures}"
    assert all(results.get(name) == "PASS" for name in CLASSIC + KIP_848), results
