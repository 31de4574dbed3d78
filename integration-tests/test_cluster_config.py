"""brook's own answers to a wrongly configured cluster node (issue #10), read from its log:

* a second process with the node.id of a running node (on this host with its own controller
  port, or as if copied to another host: 127.0.0.2 with node 2's controller port) does not
  silently join: it exits, or waits without serving clients, and its log names `node.id`; the
  cluster keeps its nodes and still creates topics;
* a controller whose node.id is not in controller.quorum.voters exits non-zero at once,
  naming `controller.quorum.voters` and `node.id`;
* a node whose fellow voters are unreachable keeps running (not serving clients yet), says
  within ~10 s that it is retrying and which voters it cannot reach, and stops on SIGTERM;
* contradictions between process.roles, node.id, the voters and the controller listener exit
  non-zero at once, naming the keys involved.

These check brook's messages, not Kafka's (whose wording differs), so the module is skipped on
the kafka target; Apache Kafka 4.4 refuses each contradiction and the non-voter controller too.
"Names a key" means brook's own output does (the harness's `==== start` line is left out).
"""

import re
import socket
import time

import pytest

from harness import paths, wire
from harness.broker import HOST, Broker
from harness.cluster import distinct_free_ports, node_settings, wait_for

pytestmark = pytest.mark.skipif(paths.target() == "kafka",
                                reason="brook's own configuration messages; Kafka words its checks differently")

EXIT_WITHIN_S = 10.0
MESSAGE_WITHIN_S = 12.0


def accepts(port: int) -> bool:
    return accepts_at(HOST, port)


def accepts_at(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def output(node: Broker) -> str:
    """What brook itself wrote (the harness's `==== start <argv>` lines, which spell out every
    key, left out)."""
    return "\n".join(line for line in node.log_text().splitlines() if not line.startswith("==== start "))


def lone_node(tmp_path, name: str, settings: dict) -> Broker:
    """A brook process with exactly `settings` (plus log.dirs and metrics.listener), launched."""
    node = Broker("brook", tmp_path / name, port=int(settings.pop("_port")), node_settings=settings)
    node.launch()
    return node


def voters_for(ports) -> str:
    return ",".join(f"{i}@{HOST}:{p}" for i, p in enumerate(ports, start=1))


def settings_of(node_id: int, voters: str, changes=None) -> dict:
    """Issue #10's settings for one node on fresh ports; `changes` {key: value} replace keys
    ({client} and {controller} in a value: the node's ports), None removes one."""
    client, controller = distinct_free_ports(2)
    s = node_settings(node_id, client, controller, voters)
    for key, value in (changes or {}).items():
        if value is None:
            s.pop(key, None)
        else:
            s[key] = value.format(client=client, controller=controller) if isinstance(value, str) else value
    s["_port"] = client
    return s


def assert_exits_naming(node: Broker, keys) -> str:
    code = node.wait_exit(EXIT_WITHIN_S)
    try:
        assert code is not None, f"still running {EXIT_WITHIN_S} s after the start\n{node.log_tail()}"
        assert code != 0, f"exited 0\n{node.log_tail()}"
        log = output(node)
        missing = [k for k in keys if k not in log]
        assert not missing, f"the log does not name {missing}\n{node.log_tail()}"
        return log
    finally:
        node.kill()


def test_a_controller_whose_node_id_is_not_a_voter_exits_naming_both_keys(tmp_path):
    voters = voters_for(distinct_free_ports(3))
    node = lone_node(tmp_path, "n4", settings_of(4, voters))
    assert_exits_naming(node, ["controller.quorum.voters", "node.id"])


CONTRADICTIONS = {
    # a controller-only node must know which listener is the controller's
    "controller-role-without-controller-listener-names": (
        {"process.roles": "controller", "controller.listener.names": "",
         "listeners": "CONTROLLER://127.0.0.1:{controller}", "advertised.listeners": None},
        ["controller.listener.names"]),
    # a broker-only node cannot be a voter
    "broker-role-but-node-id-is-a-voter": (
        {"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:{client}"},
        ["process.roles", "node.id", "controller.quorum.voters"]),
    # a broker-only node must not listen on the controller listener (Kafka's rule too)
    "broker-role-with-a-controller-listener": (
        {"process.roles": "broker", "node.id": "7"},
        ["process.roles", "controller.listener.names", "listeners"]),
    # a combined node's controller listener must be among its listeners
    "controller-listener-name-not-in-listeners": (
        {"listeners": "PLAINTEXT://127.0.0.1:{client}"},
        ["controller.listener.names", "listeners"]),
}


@pytest.mark.parametrize("case", list(CONTRADICTIONS))
def test_contradicting_role_and_listener_settings_exit_naming_the_keys(tmp_path, case):
    changes, keys = CONTRADICTIONS[case]
    voters = voters_for(distinct_free_ports(3))
    node = lone_node(tmp_path, case, settings_of(1, voters, changes))
    assert_exits_naming(node, keys)


def test_unreachable_voters_keep_the_node_waiting_and_it_says_which(tmp_path):
    own, dead2, dead3 = distinct_free_ports(3)
    voters = voters_for([own, dead2, dead3])
    s = settings_of(1, voters)
    s["listeners"] = f"PLAINTEXT://{HOST}:{s['_port']},CONTROLLER://{HOST}:{own}"
    node = lone_node(tmp_path, "n1", s)
    try:
        def said():
            log = output(node)
            named = all(re.search(rf"{HOST}:{port}\b|\b(voter|node)[ _-]?(id)?[ =:]*{vid}\b", log)
                        for vid, port in ((2, dead2), (3, dead3)))
            return named and re.search(r"retry|retrying", log, re.IGNORECASE)

        wait_for(said, MESSAGE_WITHIN_S, lambda: f"a log line saying it retries and naming voters 2 "
                 f"({HOST}:{dead2}) and 3 ({HOST}:{dead3})\n{node.log_tail()}", interval=0.5)
        assert node.running, f"exited {node.returncode}\n{node.log_tail()}"
        assert not accepts(node.port), "serves clients without a quorum"
        started = time.monotonic()
        node.stop()
        took = time.monotonic() - started
        assert node.returncode == 0 and took < 10, \
            f"SIGTERM while waiting for the quorum: exit {node.returncode} after {took:.1f} s"
    finally:
        node.kill()


def twin_settings(cluster, where: str) -> dict:
    """Node 2's settings for a second process. "other-port": on this host, with a controller
    listener of its own (its voter entry then names another port); "other-host": as if copied to
    another machine (127.0.0.2 here), binding node 2's controller port there, so that its own
    settings agree with controller.quorum.voters and only the running node 2 contradicts it."""
    s = settings_of(2, cluster.voters)
    if where == "other-host":
        client, controller = s["_port"], cluster.node(2).controller_port
        s["listeners"] = f"PLAINTEXT://{TWIN_HOST}:{client},CONTROLLER://{TWIN_HOST}:{controller}"
        s["advertised.listeners"] = f"PLAINTEXT://{TWIN_HOST}:{client}"
    return s


TWIN_HOST = "127.0.0.2"


@pytest.mark.parametrize("where", ["other-port", "other-host"])
def test_a_second_process_with_a_running_nodes_id_does_not_silently_join(tmp_path, cluster, where):
    before = {i: cluster.metadata(i, [])["brokers"] for i in cluster.node_ids}
    twin = lone_node(tmp_path, f"twin-{where}", twin_settings(cluster, where))
    twin.host = TWIN_HOST if where == "other-host" else HOST
    try:
        code = twin.wait_exit(MESSAGE_WITHIN_S)
        if where == "other-port":
            # Its own settings contradict controller.quorum.voters: a configuration error (exit 2).
            assert code == 2, f"the twin of node 2: exit {code}\n{twin.log_tail()}"
            assert "node 2's voter entry has port" in output(twin), twin.log_tail()
        else:
            # The voters know node 2 at another address: no quorum will have it, so it keeps
            # retrying (saying why) and never serves.
            assert code is None, f"the twin of node 2 exited {code}\n{twin.log_tail()}"
            assert not accepts_at(twin.host, twin.port), f"the twin of node 2 serves clients\n{twin.log_tail()}"
        assert "node.id" in output(twin), f"the twin's log does not name node.id\n{twin.log_tail()}"
        assert all(cluster.node(i).running for i in cluster.node_ids)
        after = {i: cluster.metadata(i, [])["brokers"] for i in cluster.node_ids}
        assert after == before, "the cluster's brokers changed"
        topic = f"t-after-twin-{where}"
        assert wire.create_topics(cluster.bootstrap_of(2), {topic: (3, 1, None)}) == {topic: 0}, \
            "the cluster still creates topics"
    finally:
        twin.kill()
