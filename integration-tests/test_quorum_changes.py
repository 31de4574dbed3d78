"""A controller quorum that changes (KIP-853, issue 27 item 3), driven by Kafka's own
`kafka-metadata-quorum --bootstrap-controller … add-controller / remove-controller / describe`,
on Brook and on Apache Kafka 4.4 configured the same way:

- nodes 1-3 are combined broker+controller nodes of a dynamic quorum: no
  `controller.quorum.voters`, `controller.quorum.bootstrap.servers` naming their controller
  listeners, storage formatted with `--initial-controllers 1@…:dir1,2@…:dir2,3@…:dir3`;
- nodes 4 and 5 are controller-only nodes formatted with `--no-initial-controllers`: they start
  as observers of the metadata log;
- while an AdminClient creates topics in a loop through the brokers, 4 and then 5 are added
  with `add-controller` (run with each one's own properties, as Kafka's docs do) and then two
  of the first three voters, the leader first, are removed with `remove-controller
  --controller-id N --controller-directory-id D` (a removed leader resigns; a removed voter
  stays an observer). After every step `describe --status` shows the expected voters
  with a leader among them and a high watermark that has moved on, and `describe --replication`
  shows each voter as Leader or Follower and the others as Observers;
- at the end every topic the loop created is listed: no metadata was lost;
- adding a voter again is refused (DUPLICATE_VOTER);
- the changed voter set survives restarts of a new voter and of the leader;
- a voter whose disk was wiped is formatted again (a new directory id), started as an observer,
  removed under its old directory id and added under its new one.

One cluster for the module (the steps build on each other; about a minute on Brook).
"""

import re
import shutil
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness import kafka_cli, paths
from harness.broker import HOST, Broker
from harness.cluster import (QUORUM_TOOL, START_TIMEOUT_S, distinct_free_ports, kafka_uuid, parse_quorum_status,
                             wait_for)

TARGET = paths.target()
STEP_TIMEOUT_S = 60 if TARGET == "brook" else 120


class DynamicQuorum:
    """Three combined voters formatted with --initial-controllers and two controller-only
    observers formatted with --no-initial-controllers, on one cluster id."""

    def __init__(self, base: Path):
        self.cluster_id = kafka_uuid()
        ports = distinct_free_ports(5 + 3 + 5)
        self.controller_ports = {n: ports[n - 1] for n in range(1, 6)}
        client_ports = {n: ports[5 + n - 1] for n in range(1, 4)}
        metrics_ports = {n: ports[8 + n - 1] for n in range(1, 6)}
        self.directory_ids = {n: kafka_uuid() for n in range(1, 4)}
        bootstrap = ",".join(f"{HOST}:{self.controller_ports[n]}" for n in range(1, 4))
        initial = ",".join(f"{n}@{HOST}:{self.controller_ports[n]}:{self.directory_ids[n]}" for n in range(1, 4))
        self.nodes: Dict[int, Broker] = {}
        for n in range(1, 6):
            c = self.controller_ports[n]
            settings = {
                "node.id": str(n),
                "controller.quorum.bootstrap.servers": bootstrap,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "broker.session.timeout.ms": "6000",
                "broker.heartbeat.interval.ms": "1000",
                "offsets.topic.replication.factor": "1",
                "group.initial.rebalance.delay.ms": "0",
            }
            if n <= 3:
                p = client_ports[n]
                settings.update({
                    "process.roles": "broker,controller",
                    "listeners": f"PLAINTEXT://{HOST}:{p},CONTROLLER://{HOST}:{c}",
                    "advertised.listeners": f"PLAINTEXT://{HOST}:{p}",
                })
            else:
                p = c
                settings.update({"process.roles": "controller", "listeners": f"CONTROLLER://{HOST}:{c}"})
            node = Broker(TARGET, base / f"node-{n}", None, port=p, metrics_port=metrics_ports[n],
                          node_settings=settings, cluster_id=self.cluster_id, start_timeout_s=START_TIMEOUT_S[TARGET])
            node.node_id = n
            node.format_args = ["--initial-controllers", initial] if n <= 3 else ["--no-initial-controllers"]
            self.nodes[n] = node

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[n].bootstrap for n in range(1, 4))

    def start(self) -> None:
        for node in self.nodes.values():
            node.launch()
        deadline = time.monotonic() + START_TIMEOUT_S[TARGET]
        for node in self.nodes.values():
            node.wait_ready(max(1.0, deadline - time.monotonic()))

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()

    def controller(self, n: int) -> str:
        return f"{HOST}:{self.controller_ports[n]}"

    def quorum_tool(self, *args, via: int = 1, timeout: float = 60):
        return kafka_cli.run(QUORUM_TOOL, "--bootstrap-controller", self.controller(via), *args, timeout=timeout)

    def status(self, via: int = 1) -> dict:
        return parse_quorum_status(self.quorum_tool("describe", "--status", via=via).stdout)

    def replication(self, via: int = 1) -> Dict[int, str]:
        """`describe --replication`: node id -> Status (Leader, Follower, Observer)."""
        out = self.quorum_tool("describe", "--replication", via=via).stdout
        rows = {}
        for line in out.splitlines()[1:]:
            fields = line.split()
            if fields and re.fullmatch(r"\d+", fields[0]):
                rows[int(fields[0])] = fields[-1]
        return rows

    def replication_rows(self, via: int = 1) -> List[tuple]:
        """`describe --replication` rows as (node id, directory id, log end offset, status)."""
        out = self.quorum_tool("describe", "--replication", via=via).stdout
        rows = []
        for line in out.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 4 and re.fullmatch(r"\d+", fields[0]):
                rows.append((int(fields[0]), fields[1], int(fields[2]), fields[-1]))
        return rows

    def properties_file(self, n: int) -> Path:
        """Node n's own settings as a file: what `add-controller --command-config` reads (its id,
        controller listener and the directory id from its meta.properties)."""
        node = self.nodes[n]
        path = node.data_dir / "controller.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in node.settings().items()))
        return path

    def directory_id(self, n: int) -> str:
        text = (Path(self.nodes[n].settings()["log.dirs"]) / "meta.properties").read_text()
        return re.search(r"^directory\.id=(\S+)", text, re.M).group(1)


class TopicLoop:
    """Creates topics one after another through the brokers until stopped; remembers each one
    whose creation was acknowledged."""

    def __init__(self, bootstrap: str):
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.created: List[str] = []
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"quorum-change-{i}"
            try:
                self.admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(timeout=60)
                self.created.append(name)
                i += 1
            except Exception as e:  # a retriable error while leadership moves: try the next name
                self.errors.append(f"{name}: {e}")
                i += 1
                time.sleep(0.2)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)


@pytest.fixture(scope="module")
def quorum(tmp_path_factory):
    q = DynamicQuorum(tmp_path_factory.mktemp("dynamic-quorum"))
    q.start()
    yield q
    q.stop()


def expect_voters(q: DynamicQuorum, voters: List[int], observers_include: List[int], last_hw: int) -> int:
    """Polls `describe --status` until it shows exactly `voters` with a leader among them, the
    observers listed and the high watermark past `last_hw`; checks `--replication` agrees.
    Returns the high watermark."""
    def shown():
        try:
            s = q.status(via=voters[-1])
        except kafka_cli.CliError as e:
            # Right after a leader removes itself, Brook's DescribeQuorum from a voter's own view
            # can name that leader, no longer a voter, and the tool's `describe --status` fails
            # looking it up (NoSuchElementException); Kafka's non-leader answers
            # NOT_LEADER_OR_FOLLOWER instead. A known Brook gap (stop note 38): poll on.
            if "NoSuchElementException" in (e.stderr or ""):
                return None
            raise
        ok = (s.get("CurrentVoters") == sorted(voters) and s["LeaderId"] in voters
              and set(observers_include) <= set(s.get("CurrentObservers", [])) and s["HighWatermark"] > last_hw)
        return s if ok else None

    status = wait_for(shown, STEP_TIMEOUT_S, f"voters {voters}, observers ⊇ {observers_include}", interval=1.0)
    rows = q.replication(via=voters[-1])
    assert {n: rows.get(n) for n in voters} == {n: ("Leader" if n == status["LeaderId"] else "Follower")
                                                 for n in voters}, rows
    assert all(rows.get(n) == "Observer" for n in observers_include), rows
    return status["HighWatermark"]


def test_controllers_are_added_and_removed_with_kafkas_tool_while_topics_are_created(quorum):
    q = quorum
    started = time.monotonic()
    hw = expect_voters(q, [1, 2, 3], [4, 5], -1)
    assert {q.directory_id(n) for n in (1, 2, 3)} == set(q.directory_ids.values())
    loop = TopicLoop(q.bootstrap)
    loop.start()
    try:
        voters = [1, 2, 3]
        for n in (4, 5):
            wait_for(lambda: len(loop.created) > 0, STEP_TIMEOUT_S, "a topic created")
            out = q.quorum_tool("--command-config", q.properties_file(n), "add-controller", via=1).stdout
            assert out.strip() == (f"Added controller {n} with directory id {q.directory_id(n)} and endpoints: "
                                   f"CONTROLLER://{q.controller(n)}"), out
            voters.append(n)
            hw = expect_voters(q, voters, [m for m in (4, 5) if m not in voters], hw)
        # The leader removes itself first when it is one of the first three (it is unless an
        # election moved it to 4 or 5): it must resign, and the others elect a leader.
        leader = q.status(via=4)["LeaderId"]
        removed = ([leader] if leader in (1, 2, 3) else []) + [n for n in (1, 2, 3) if n != leader]
        for n in removed[:2]:
            count = len(loop.created)
            wait_for(lambda: len(loop.created) > count, STEP_TIMEOUT_S, "another topic created")
            # `=`: a directory id may start with '-', which argparse would take for an option.
            out = q.quorum_tool("remove-controller", "--controller-id", n,
                                f"--controller-directory-id={q.directory_id(n)}", via=4).stdout
            assert out.strip() == f"Removed KRaft controller {n} with directory id {q.directory_id(n)}", out
            voters.remove(n)
            hw = expect_voters(q, voters, [n], hw)  # a removed controller stays an observer
        count = len(loop.created)
        wait_for(lambda: len(loop.created) > count + 2, STEP_TIMEOUT_S, "topics still created after the changes")
    finally:
        loop.stop()
    # A broker serves Metadata from its own copy of the log, which may trail the controller's
    # commit of the last creation by a moment (as on Kafka): poll, with a deadline.
    admin = AdminClient({"bootstrap.servers": q.bootstrap})
    missing = lambda: sorted(set(loop.created) - set(admin.list_topics(timeout=30).topics))  # noqa: E731
    wait_for(lambda: not missing(), STEP_TIMEOUT_S, lambda: f"every created topic listed, missing {missing()}",
             interval=0.5)
    print(f"{TARGET}: {len(loop.created)} topics created, {len(loop.errors)} retried, "
          f"{time.monotonic() - started:.1f} s for the quorum changes")


def test_adding_a_voter_twice_is_refused_as_kafka_refuses_it(quorum):
    q = quorum
    status = q.status(via=4)
    voter = max(status["CurrentVoters"])
    with pytest.raises(kafka_cli.CliError) as refused:
        q.quorum_tool("--command-config", q.properties_file(voter), "add-controller", via=4)
    assert "DuplicateVoterException" in refused.value.stderr or "already part of the set of voters" in (
        refused.value.stderr + refused.value.stdout), refused.value


def test_the_changed_voter_set_survives_restarts(quorum):
    """Membership is in the metadata log: a restarted new voter and a restarted leader come
    back to the same voters, and the quorum commits on."""
    q = quorum
    before = q.status(via=4)
    voters = before["CurrentVoters"]
    leader = before["LeaderId"]
    for n in dict.fromkeys([4, leader]):
        q.nodes[n].stop()
        q.nodes[n].start()
        via = next(m for m in voters if m != n)
        wait_for(lambda: (lambda s: s["CurrentVoters"] == voters and s["LeaderId"] in voters
                          and s["HighWatermark"] >= before["HighWatermark"])(q.status(via=via)),
                 STEP_TIMEOUT_S, f"voters {voters} after node {n} restarted", interval=1.0)
    assert q.status(via=4)["CurrentVoters"] == voters


def test_a_voter_whose_disk_was_wiped_is_replaced_under_a_new_directory_id(quorum):
    """Kafka's procedure: the node is formatted again (--no-initial-controllers, so a new
    directory id) and started, then its old replica key is removed and the new one added."""
    q = quorum
    status = q.status(via=4)
    voters = status["CurrentVoters"]
    n = next(m for m in (5, 4) if m in voters and m != status["LeaderId"])
    old_dir = q.directory_id(n)
    node = q.nodes[n]
    via = next(m for m in voters if m != n)
    node.stop()
    stopped_at = next(leo for (i, d, leo, _) in q.replication_rows(via=via) if (i, d) == (n, old_dir))
    shutil.rmtree(node.log_dirs)
    node.start()
    new_dir = q.directory_id(n)
    assert new_dir != old_dir

    # Until it is replaced, the node on the new disk is not the voter (KIP-853's replica key):
    # it must neither vote nor count towards a commit with its empty log. Kafka lists it as an
    # observer under its new directory id; Brook's node says it refused the voter's requests.
    # Either way the voter's row gets no further than where the old disk stopped, while the
    # log moves on (a topic created).
    if TARGET == "kafka":
        wait_for(lambda: any((i, d, st) == (n, new_dir, "Observer") for (i, d, _, st) in q.replication_rows(via=via)),
                 STEP_TIMEOUT_S, f"{n} observing under {new_dir}", interval=1.0)
    else:
        wait_for(lambda: "raft request for another replica of this node id refused" in node.log_text(),
                 STEP_TIMEOUT_S, f"{n} refusing the voter's raft requests", interval=0.5)
    admin = AdminClient({"bootstrap.servers": q.bootstrap})
    admin.create_topics([NewTopic(f"after-wipe-{n}", 1, 1)])[f"after-wipe-{n}"].result(timeout=STEP_TIMEOUT_S)
    rows = q.replication_rows(via=via)
    leader_leo = max(leo for (_, _, leo, st) in rows if st == "Leader")
    voter_leo = next(leo for (i, d, leo, _) in rows if (i, d) == (n, old_dir))
    assert leader_leo > stopped_at and voter_leo <= stopped_at, (stopped_at, rows)

    out = q.quorum_tool("remove-controller", "--controller-id", n, f"--controller-directory-id={old_dir}",
                        via=via).stdout
    assert out.strip() == f"Removed KRaft controller {n} with directory id {old_dir}", out
    wait_for(lambda: n not in q.status(via=via)["CurrentVoters"], STEP_TIMEOUT_S, f"{n} removed", interval=1.0)

    def added():
        try:
            return q.quorum_tool("--command-config", q.properties_file(n), "add-controller", via=via).stdout
        except kafka_cli.CliError as e:  # not caught up yet as an observer: Kafka's tool says so
            if "lagging behind" in e.stderr or "not ready" in e.stderr or "TimeoutException" in e.stderr:
                return None
            raise

    out = wait_for(added, STEP_TIMEOUT_S, f"{n} added back with directory id {new_dir}", interval=2.0)
    assert out.strip().startswith(f"Added controller {n} with directory id {new_dir}"), out
    wait_for(lambda: q.status(via=via)["CurrentVoters"] == voters, STEP_TIMEOUT_S, f"voters {voters}", interval=1.0)
    text = q.quorum_tool("describe", "--replication", via=via).stdout
    assert re.search(rf"^{n}\s+{re.escape(new_dir)}\s", text, re.M), text
