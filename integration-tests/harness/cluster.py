"""A 3-node cluster on loopback: brook (the binary under test) or Apache Kafka (the reference).

Every node is a combined broker+controller (`process.roles=broker,controller`) with its own
client port, controller port and data directory; the controllers form one static quorum
(`controller.quorum.voters`), or with `quorum="dynamic"` a KIP-853 dynamic one: no voter list,
`controller.quorum.bootstrap.servers` naming every controller listener, each node's storage
formatted with `--initial-controllers 1@host:port:dir1,…` (the same on every node; the directory
ids are `directory_ids`), so `kafka-metadata-quorum add-controller / remove-controller` can change
the voters (chaos/voters.py). `add_broker()` grows a running cluster by a broker-only node
(`process.roles=broker`, no controller port) that follows that quorum without voting. Both
kinds get the same Kafka-named settings (issue #10's contract, `node_settings` below); brook
takes them as `--override`s, Kafka as a server.properties written by
scripts/kafka-cluster-ref.sh, which also formats each node's storage once with the cluster's
shared id (a broker-only node of a static-voter cluster formats with no controller flags).

Invariants: node ids are 1..size and `nodes[i]` is node i+1; a node's ports and data never
change, so `node.start()` after `kill()`/`stop()` brings the same node back with its data.
`start()` launches every process first and only then waits for each (a node cannot be ready
before a quorum of its peers runs), then until every node's Metadata lists every node.

Quorum leader: on brook the Metadata response's controller_id is the quorum leader; on Kafka it
is a random broker, so `quorum_leader()` asks `kafka-metadata-quorum describe --status` there.
"""

import base64
import concurrent.futures
import re
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional

from . import door, kafka_cli, wire
from .broker import HOST, Broker, BrokerStartError, free_port

START_TIMEOUT_S = {"brook": 60.0, "kafka": 150.0}
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


def kafka_uuid() -> str:
    """A random id in Kafka's Uuid text form (22 chars of URL-safe base64), never starting with
    '-' (as Kafka's `Uuid.randomUuid` avoids it: command lines would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def wait_for(predicate: Callable[[], object], timeout: float, what="condition", interval: float = 0.1):
    """Poll `predicate` until it returns something truthy (returned); raise AssertionError naming
    `what` (a string or a callable giving one) and the last value after `timeout` seconds.
    Connection errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = predicate()
        except (OSError, ValueError) as e:
            last = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            desc = what() if callable(what) else what
            raise AssertionError(f"not within {timeout} s: {desc}; last value: {last!r}")
        time.sleep(interval)


def node_settings(node_id: int, client_port: int, controller_port: Optional[int], voters: Optional[str],
                  bootstrap_servers: Optional[str] = None) -> dict:
    """Issue #10's settings of one combined broker+controller node (Kafka keys), or of a
    broker-only node when `controller_port` is None: it binds no controller listener and finds the
    controllers through `controller.quorum.voters` like the voters do (Kafka still needs the
    CONTROLLER name and its protocol to reach them). A dynamic quorum's node gets
    `controller.quorum.bootstrap.servers` (`bootstrap_servers`) instead of a voter list.
    `log.dirs` is added by its Broker."""
    listeners = f"PLAINTEXT://{HOST}:{client_port}"
    if controller_port is not None:
        listeners += f",CONTROLLER://{HOST}:{controller_port}"
    quorum = {"controller.quorum.bootstrap.servers": bootstrap_servers} if bootstrap_servers is not None \
        else {"controller.quorum.voters": voters}
    return {
        "process.roles": "broker,controller" if controller_port is not None else "broker",
        "node.id": str(node_id),
        **quorum,
        "listeners": listeners,
        "advertised.listeners": f"PLAINTEXT://{HOST}:{client_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "group.initial.rebalance.delay.ms": "0",
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "1000",
        "offsets.topic.replication.factor": "1",
    }


class Cluster:
    """`size` combined broker+controller nodes of `kind` ("brook" or "kafka") under `base_dir`.
    `overrides` (Kafka keys) apply to every node, on top of the contract's settings. `quorum`:
    "static" (`controller.quorum.voters`, kraft.version 0) or "dynamic" (KIP-853, module doc)."""

    def __init__(self, kind: str, base_dir: Path, size: int = 3, overrides: Optional[dict] = None,
                 quorum: str = "static"):
        if quorum not in ("static", "dynamic"):
            raise ValueError(f"quorum must be 'static' or 'dynamic', not {quorum!r}")
        self.kind, self.size, self.quorum = kind, size, quorum
        self.base_dir = Path(base_dir)
        self.cluster_id = kafka_uuid()
        ports = distinct_free_ports(size * (3 if kind == "brook" else 2))
        client_ports, controller_ports = ports[:size], ports[size:2 * size]
        metrics_ports = ports[2 * size:] if kind == "brook" else [None] * size
        self.voters = ",".join(f"{n}@{HOST}:{controller_ports[n - 1]}" for n in range(1, size + 1))
        # Dynamic quorum: every controller listener, and each voter's metadata directory id
        # (the id `remove-controller --controller-directory-id` names it by).
        self.controller_bootstrap = ",".join(f"{HOST}:{c}" for c in controller_ports)
        self.directory_ids: Dict[int, str] = {n: kafka_uuid() for n in range(1, size + 1)} if quorum == "dynamic" else {}
        initial = ",".join(f"{n}@{HOST}:{controller_ports[n - 1]}:{self.directory_ids[n]}" for n in self.directory_ids)
        self.nodes: List[Broker] = []
        for n in range(1, size + 1):
            p, c = client_ports[n - 1], controller_ports[n - 1]
            settings = node_settings(n, p, c, self.voters) if quorum == "static" else \
                node_settings(n, p, c, None, bootstrap_servers=self.controller_bootstrap)
            node = Broker(kind, self.base_dir / f"node-{n}", overrides, port=p, metrics_port=metrics_ports[n - 1],
                          node_settings=settings, cluster_id=self.cluster_id, start_timeout_s=START_TIMEOUT_S[kind])
            node.node_id = n
            node.controller_port = c
            if quorum == "dynamic":
                node.format_args = ["--initial-controllers", initial]
            self.nodes.append(node)
        self.overrides = overrides

    # -- addressing ------------------------------------------------------------------------------
    def node(self, node_id: int) -> Broker:
        return self.nodes[node_id - 1]

    @property
    def node_ids(self) -> List[int]:
        return list(range(1, self.size + 1))

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated."""
        return ",".join(n.bootstrap for n in self.nodes)

    def bootstrap_of(self, node_id: int) -> str:
        return self.node(node_id).bootstrap

    def running_ids(self) -> List[int]:
        return [n.node_id for n in self.nodes if n.running]

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Launch every node, then wait for each to serve and for every node's metadata to list
        all of them; on failure stop everything and raise BrokerStartError with every log tail."""
        for n in self.nodes:
            n.launch()
        try:
            deadline = time.monotonic() + START_TIMEOUT_S[self.kind]
            for n in self.nodes:
                n.wait_ready(max(1.0, deadline - time.monotonic()))
            self.wait_registered(max(5.0, deadline - time.monotonic()))
        except (BrokerStartError, AssertionError) as e:
            tails = self.log_tails()
            self.stop()
            raise BrokerStartError(f"{self.kind} cluster did not start: {str(e)[:2000]}\n{tails}") from None

    def add_broker(self) -> Broker:
        """Start node `size + 1` as a broker-only node (`process.roles=broker`) joining the
        running cluster: it follows the metadata quorum (brook: a raft learner; Kafka: an
        observer, its storage formatted with the cluster's id and the static voters) without
        voting. Returns it once it serves and every running node's Metadata lists it; on
        failure it is stopped and BrokerStartError carries its log tail.

        It is given `controller.quorum.voters`, not `controller.quorum.bootstrap.servers`: a
        static-voter cluster (kraft.version 0) keeps no voter set in its log, so a Kafka broker
        that knows only bootstrap servers never learns where to register and exits ("unable to
        register with the controller quorum"). Brook's learner accepts either. A dynamic quorum's
        broker-only node gets `controller.quorum.bootstrap.servers` (its voters are in the log)."""
        n = self.size + 1
        used = {b.port for b in self.nodes} | {b.metrics_port for b in self.nodes} | \
            {b.controller_port for b in self.nodes}
        port = free_port(avoid=frozenset(used))
        metrics_port = free_port(avoid=frozenset(used | {port})) if self.kind == "brook" else None
        settings = node_settings(n, port, None, self.voters) if self.quorum == "static" else \
            node_settings(n, port, None, None, bootstrap_servers=self.controller_bootstrap)
        node = Broker(self.kind, self.base_dir / f"node-{n}", self.overrides, port=port, metrics_port=metrics_port,
                      node_settings=settings, cluster_id=self.cluster_id,
                      start_timeout_s=START_TIMEOUT_S[self.kind])
        node.node_id, node.controller_port = n, None
        self.nodes.append(node)
        self.size = n
        try:
            node.start()
            self.wait_registered(START_TIMEOUT_S[self.kind])
        except (BrokerStartError, AssertionError) as e:
            node.stop()
            raise BrokerStartError(f"broker-only node {n} did not join: {str(e)[:2000]}\n{node.log_tail()}") from None
        return node

    def stop(self) -> None:
        """SIGTERM every node at once (a lone survivor cannot shut down in a quorum-less
        cluster as fast as all of them together), then wait; SIGKILL what outlives the deadline."""
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.stop(), self.nodes))
        door.forget(n.bootstrap for n in self.nodes)

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()

    def wait_registered(self, timeout: float = 30.0, node_ids: Optional[List[int]] = None) -> None:
        """Until every running node's metadata lists every node of `node_ids` (default: every
        running node) at its address."""
        expected_ids = node_ids if node_ids is not None else self.running_ids()
        expected = {i: self.bootstrap_of(i) for i in expected_ids}

        def registered():
            views = {i: wire.metadata(self.bootstrap_of(i), [])["brokers"] for i in self.running_ids()}
            return all(all(v.get(i) == addr for i, addr in expected.items()) for v in views.values()) and views

        wait_for(registered, timeout, f"every running node lists nodes {expected}")

    @staticmethod
    def wait_for(predicate: Callable[[], object], timeout: float, what="condition", interval: float = 0.1):
        """harness.cluster.wait_for, for tests holding only the fixture."""
        return wait_for(predicate, timeout, what, interval)

    # -- views -----------------------------------------------------------------------------------
    def metadata(self, node_id: int, topics: Optional[List[str]] = None) -> dict:
        """Node `node_id`'s own Metadata answer (harness.wire.metadata)."""
        return wire.metadata(self.bootstrap_of(node_id), topics)

    def describe_quorum(self, node_id: Optional[int] = None, timeout: float = 60) -> dict:
        """`kafka-metadata-quorum --bootstrap-server <node> describe --status`, parsed:
        {"LeaderId": int, "LeaderEpoch": int, "HighWatermark": int, "CurrentVoters": [ids], ...}.
        Raises kafka_cli.CliError if the tool fails."""
        node_id = node_id if node_id is not None else self.running_ids()[0]
        proc = kafka_cli.run(QUORUM_TOOL, "--bootstrap-server", self.bootstrap_of(node_id), "describe", "--status",
                             timeout=timeout)
        return parse_quorum_status(proc.stdout)

    def quorum_leader(self, node_id: Optional[int] = None) -> int:
        """The metadata quorum's leader as node `node_id` (default: the first running one)
        reports it: Kafka's DescribeQuorum (the tool) on Kafka, Metadata controller_id on brook."""
        node_id = node_id if node_id is not None else self.running_ids()[0]
        if self.kind == "kafka":
            return self.describe_quorum(node_id)["LeaderId"]
        return self.metadata(node_id, [])["controller_id"]

    def reported_quorum_leader(self, node_id: int, timeout: float = 1.0) -> int:
        """The quorum leader as node `node_id` reports it in one request, fast enough to time a
        failover. brook: its Metadata controller_id (-1 while it knows none). Kafka: DescribeQuorum
        on its controller listener, which only the quorum's leader answers (the others say
        NOT_LEADER_OR_FOLLOWER: -1 here); asked through a broker, the request would be forwarded
        to the controller the broker last knew, and wait there while that one is paused.
        OSError when the node does not answer within `timeout`."""
        if self.kind == "kafka":
            q = wire.describe_quorum(f"{HOST}:{self.node(node_id).controller_port}", timeout=timeout)
            return q["leader_id"] if q["error"] == 0 else -1
        return self.metadata(node_id, [])["controller_id"]

    def wait_new_quorum_leader(self, gone: int, timeout: float, node_ids: Optional[List[int]] = None,
                               interval: float = 0.02) -> int:
        """Until the nodes of `node_ids` (default: the running ones) report one quorum leader
        other than `gone`, polled every `interval` for timing a failover; returns it. brook:
        every one of them names it; Kafka: it answers as the leader (`reported_quorum_leader`)."""
        def replaced():
            reports = [self.reported_quorum_leader(i) for i in (node_ids or self.running_ids())]
            named = set(reports) - {-1}
            if len(named) != 1 or (self.kind == "brook" and -1 in reports):
                return None
            (leader,) = named
            return leader if leader != gone else None

        return wait_for(replaced, timeout, f"a quorum leader other than node {gone}", interval=interval)

    def wait_quorum_leader(self, timeout: float = 30.0, not_in=()) -> int:
        """Until every running node agrees on one quorum leader that is running (and not in
        `not_in`); returns it. On Kafka the tool is asked once per round, through a running node."""
        def agreed():
            running = self.running_ids()
            if self.kind == "kafka":
                try:
                    leaders = {self.quorum_leader(running[0])}
                except kafka_cli.CliError:
                    return None
            else:
                leaders = {self.quorum_leader(i) for i in running}
            if len(leaders) == 1:
                (leader,) = leaders
                if leader in running and leader not in not_in:
                    return leader
            return None

        return wait_for(agreed, timeout, "one running quorum leader agreed by every running node", interval=0.2)

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.bootstrap}) ---\n{n.log_tail(lines)}" for n in self.nodes)

    def __repr__(self) -> str:
        return f"Cluster({self.kind}, {self.bootstrap})"


def parse_quorum_status(text: str) -> dict:
    """The `Key: value` lines of `kafka-metadata-quorum describe --status`; ids of CurrentVoters
    and CurrentObservers as lists of ints."""
    out: Dict[str, object] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in ("CurrentVoters", "CurrentObservers"):
            out[key] = sorted(int(i) for i in re.findall(r'"id":\s*(-?\d+)', value))
        elif re.fullmatch(r"-?\d+", value):
            out[key] = int(value)
        else:
            out[key] = value
    if "LeaderId" not in out:
        raise ValueError(f"no LeaderId in the tool's output: {text[-1000:]!r}")
    return out


def distinct_free_ports(count: int) -> List[int]:
    ports: List[int] = []
    while len(ports) < count:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports
