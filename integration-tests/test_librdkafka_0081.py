"""librdkafka's own admin test 0081 (librdkafka 2.12.1, tests/0081-admin.c) against one broker
(issue 29 §2).

librdkafka's test runner (harness/librdkafka_tests.py, built by third-party/install.sh) runs
test 0081 in quick mode (librdkafka's CI mode: the producer-type client) once per sub-test
function, selected with librdkafka's SUBTESTS, so that each admin API is its own cell: its
exit code 0, "0081_admin PASSED" and at least one of the function's sub-tests reported PASS
(a filter that matched nothing cannot pass). The assertion message is the runner's own failure
report. The broker runs as librdkafka's own test clusters do (trivup), on both targets:
StandardAuthorizer, allow.everyone.if.no.acl.found=true and the PLAINTEXT principal
(User:ANONYMOUS) a super user.

Every cell must pass on both targets, Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka) and brook;
IncrementalAlterConfigs and DescribeConfigs_groups alter and describe the GROUP config resource
(KIP-848 group configs, resource type 32).
"""

import pytest

from harness import librdkafka_tests, paths
from harness.broker import Broker

# librdkafka's own test brokers (trivup's KafkaBrokerApp): an authorizer that allows what no
# ACL denies, the test client's principal a super user.
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
}

# Every sub-test function of 0081 that runs against a broker without SASL (the
# *_with_authorized_ops ones skip themselves without it), in the test's order.
SUBTESTS = [
    "unclean_destroy", "CreateTopics", "DeleteTopics", "CreatePartitions", "CreateAcls", "DescribeAcls",
    "DeleteAcls", "AlterConfigs", "IncrementalAlterConfigs", "DescribeConfigs", "DescribeConfigs_groups",
    "DeleteRecords", "ListConsumerGroups", "DescribeConsumerGroups", "DescribeTopics", "DescribeCluster",
    "DeleteGroups", "ListOffsets", "DeleteConsumerGroupOffsets", "AlterConsumerGroupOffsets",
    "ListConsumerGroupOffsets", "UserScramCredentials",
]


@pytest.fixture(scope="module")
def rdk_broker(tmp_path_factory):
    librdkafka_tests.runner()  # fail at once, naming the installer, if the runner is missing
    b = Broker(paths.target(), tmp_path_factory.mktemp("rdk-broker"), AUTHORIZER)
    b.start()
    yield b
    b.stop()


@pytest.mark.parametrize("subtest", SUBTESTS)
def test_librdkafka_0081_admin_subtest_passes(rdk_broker, subtest, tmp_path):
    code, output = librdkafka_tests.run_test(rdk_broker.bootstrap, "0081", tmp_path / "test.conf",
                                             subtests=f"do_test_{subtest}:")
    (tmp_path / "test-runner.log").write_text(output)
    passed = [s for s in librdkafka_tests.passed_subtests(output) if s.startswith(f"do_test_{subtest}:")]
    report = librdkafka_tests.failures(output) or output[-3000:]
    assert code == 0 and "Test 0081_admin PASSED" in output, \
        f"test-runner exit {code}; output {tmp_path / 'test-runner.log'}\n{report}"
    assert passed, f"no do_test_{subtest} sub-test ran:\n{output[-3000:]}"
    print(f"{subtest}: {len(passed)} sub-tests passed")
