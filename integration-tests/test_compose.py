"""docker-compose.yml cannot drift from what the `brook` binary accepts, nor prometheus/ and
grafana/ from the metrics the binary serves (issue #10, item 7). There is no Docker engine here,
so the file is checked in three ways:

1. Debian's `docker-compose config` (1.29, installed by install.sh) accepts it.
2. Each brook service (the ones built from the Dockerfile) runs as a local process with its own
   argv (the Dockerfile's ENTRYPOINT, or the service's `entrypoint`, then its `command`) and its
   own `environment`, translated to where Docker would have put it (harness/compose.py):
     - a service's name (and `hostname`) brook-N -> 127.0.1.N; all of 127/8 is loopback on
       Linux, so every node serves the same container ports on its own address;
     - a wildcard bind (`0.0.0.0`, `::`, an empty host) -> that address: in a container it
       means the container's own interfaces;
     - a published port on the host, `localhost:H` with `ports: ["H:C"]` -> the address of the
       service publishing H and its port C, which is where Docker forwards H;
     - a volume's container path -> a temp dir.
   The three must form one cluster: Metadata from one node lists all three brokers (at their
   advertised addresses) and a controller, a 3-partition topic is produced to and read back
   through one bootstrap address, and exactly one node reports `brook_controller_active 1`.
   A client of the INTERNAL listener (other containers) is answered with the service addresses,
   and the brokers replicate over it (a topic on all three nodes keeps its ISR at three); the
   listener brokers replicate over advertises the service name, never a host-published address.
3. prometheus/prometheus.yml scrapes exactly the brook services' metrics endpoints, and every
   metric the Grafana dashboard queries exists in some node's /metrics.

The processes are stopped with SIGTERM at the end. The static checks run on either target; the
process checks only on brook (Kafka has no Prometheus endpoint and reads no BROOK_* variables).
"""

import json
import re
import shutil
import subprocess
import time
import uuid
from typing import Dict, List, Set, Tuple

import pytest
import yaml

from harness import compose, paths
from harness.compose import (
    Node, brook_service_names, client_listener, named_listener, service_argv, service_env, service_ports,
    settings_of,
)

REPO = paths.REPO_DIR
COMPOSE_FILE = REPO / "docker-compose.yml"
PROMETHEUS_FILE = REPO / "prometheus" / "prometheus.yml"
GRAFANA_DIR = REPO / "grafana"
DASHBOARD_FILE = GRAFANA_DIR / "dashboards" / "brook.json"

RECORDS = 300


# ---------------------------------------------------------------------------------------------
# Reading the compose file, the Dockerfile, prometheus.yml and the dashboard


def load_compose() -> dict:
    return compose.load_compose(COMPOSE_FILE)


def load_prometheus() -> dict:
    return yaml.safe_load(PROMETHEUS_FILE.read_text())


def scrape_targets(prom: dict) -> Dict[str, Set[str]]:
    """job name -> its static targets."""
    jobs: Dict[str, Set[str]] = {}
    for job in prom.get("scrape_configs") or []:
        targets = jobs.setdefault(job["job_name"], set())
        for static in job.get("static_configs") or []:
            targets.update(static.get("targets") or [])
    return jobs


def load_dashboard() -> dict:
    return json.loads(DASHBOARD_FILE.read_text())


def dashboard_targets(dashboard: dict) -> List[dict]:
    out = []

    def walk(panels):
        for panel in panels or []:
            out.extend(t for t in panel.get("targets") or [] if t.get("expr"))
            walk(panel.get("panels"))

    walk(dashboard.get("panels"))
    return out


_PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless", "inf", "nan"}


def promql_metric_names(expr: str) -> Set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names in matchers or grouping clauses, or ranges."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # the exponent of a number (1e3)
        if e[m.end():].lstrip().startswith("(") or m.group(0).lower() in _PROMQL_WORDS:
            continue
        names.add(m.group(0))
    return names


def metric_names_served(text: str) -> Set[str]:
    return {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}


def metric_values(text: str, name: str) -> List[float]:
    out = []
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})?\s+(\S+)", line)
        if m:
            out.append(float(m.group(2)))
    return out


# ---------------------------------------------------------------------------------------------
# Static checks: any target


def test_docker_compose_config_accepts_the_file():
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is not installed (integration-tests/install.sh installs Debian's 1.29)"
    result = subprocess.run(
        [exe, "--project-directory", str(REPO), "-f", str(COMPOSE_FILE), "config"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    # Its normalised output holds the same services as the file read here.
    assert set(yaml.safe_load(result.stdout)["services"]) == set(load_compose()["services"])


def test_three_brook_services_with_distinct_node_ids_and_published_ports():
    compose = load_compose()
    names = brook_service_names(compose)
    assert len(names) == 3, f"expected three brook services, found {names}"
    ids, published = set(), []
    for name in names:
        svc = compose["services"][name]
        settings = settings_of(service_argv(svc), service_env(svc))
        for key in ("node.id", "process.roles", "controller.quorum.voters", "listeners", "advertised.listeners", "metrics.listener"):
            assert key in settings, f"{name}: {key} must be set explicitly (the test maps it to a local address)"
        ids.add(settings["node.id"])
        published += [host for host, _ in service_ports(svc)]
        voters = {v.split("@")[0]: v.split("@")[1] for v in settings["controller.quorum.voters"].split(",")}
        assert set(voters) == {"1", "2", "3"} and all(v.split(":")[0] in names for v in voters.values()), (
            f"{name}: controller.quorum.voters must name the three brook services: {voters}"
        )
    assert ids == {"1", "2", "3"}
    assert len(published) == len(set(published)), f"a host port is published twice: {published}"


def test_advertised_listeners_reach_the_node_from_the_host():
    """Each node advertises a host:port that a client on the host reaches it by: a port the
    same service publishes, forwarding to its client listener's container port."""
    compose = load_compose()
    for name in brook_service_names(compose):
        svc = compose["services"][name]
        settings = settings_of(service_argv(svc), service_env(svc))
        adv_host, adv_port = client_listener(settings, "advertised.listeners")
        _bind_host, bind_port = client_listener(settings, "listeners")
        if adv_host in ("localhost", "127.0.0.1"):
            assert (adv_port, bind_port) in service_ports(svc), (
                f"{name} advertises {adv_host}:{adv_port} but does not publish {adv_port}:{bind_port}"
            )
        else:
            assert adv_host in (name, svc.get("hostname")) and adv_port == bind_port, (
                f"{name} advertises {adv_host}:{adv_port}, which is neither a published port nor its own listener"
            )


def test_brokers_reach_each_other_and_other_containers_by_service_name():
    """In a container `localhost` is the container itself: the listener the brokers replicate
    over (inter.broker.listener.name) must advertise the service's name on the compose network,
    at the port its listener binds, never a host-published localhost address."""
    compose = load_compose()
    for name in brook_service_names(compose):
        svc = compose["services"][name]
        settings = settings_of(service_argv(svc), service_env(svc))
        inter_broker = settings.get("inter.broker.listener.name")
        assert inter_broker, f"{name}: inter.broker.listener.name must name the listener brokers reach each other on"
        host, port = named_listener(settings, "advertised.listeners", inter_broker)
        _bind_host, bind_port = named_listener(settings, "listeners", inter_broker)
        assert host in (name, svc.get("hostname")) and port == bind_port, (
            f"{name} advertises {inter_broker} as {host}:{port}: its peers would not reach it there"
        )


def test_prometheus_scrapes_exactly_the_brook_metrics_endpoints():
    compose = load_compose()
    expected = set()
    for name in brook_service_names(compose):
        svc = compose["services"][name]
        port = settings_of(service_argv(svc), service_env(svc))["metrics.listener"].rpartition(":")[2]
        expected.add(f"{name}:{port}")
    jobs = scrape_targets(load_prometheus())
    assert set().union(*jobs.values()) == expected, f"scrape targets {jobs} != brook metrics endpoints {expected}"
    # The dashboard's `up{job="..."}` selects a job that exists.
    for target in dashboard_targets(load_dashboard()):
        for job in re.findall(r'job\s*=\s*"([^"]*)"', target["expr"]):
            assert job in jobs, f"dashboard expr {target['expr']!r} selects job {job!r}; prometheus.yml has {sorted(jobs)}"
    # The Prometheus service reads this file.
    prom_svc = compose["services"]["prometheus"]
    mounts = {str(v).split(":")[0]: str(v).split(":")[1] for v in prom_svc.get("volumes") or [] if str(v).startswith("./")}
    assert mounts.get("./prometheus/prometheus.yml") == "/etc/prometheus/prometheus.yml"


def test_grafana_provisions_the_datasource_and_dashboard_it_is_given():
    compose = load_compose()
    grafana = compose["services"]["grafana"]
    mounts = {str(v).split(":")[0]: str(v).split(":")[1] for v in grafana.get("volumes") or [] if str(v).startswith("./")}
    assert mounts.get("./grafana/provisioning") == "/etc/grafana/provisioning"
    datasources = [
        ds
        for f in sorted((GRAFANA_DIR / "provisioning" / "datasources").glob("*.y*ml"))
        for ds in yaml.safe_load(f.read_text()).get("datasources") or []
    ]
    assert any(ds["type"] == "prometheus" and ds["url"].startswith("http://prometheus:") for ds in datasources), datasources
    providers = [
        p
        for f in sorted((GRAFANA_DIR / "provisioning" / "dashboards").glob("*.y*ml"))
        for p in yaml.safe_load(f.read_text()).get("providers") or []
    ]
    dashboards_mount = mounts.get("./grafana/dashboards")
    assert dashboards_mount and any(p["options"]["path"] == dashboards_mount for p in providers), (providers, mounts)
    dashboard = load_dashboard()
    assert dashboard["title"] == "Brook"
    uids = {ds.get("uid") for ds in datasources}
    for target in dashboard_targets(dashboard):
        uid = (target.get("datasource") or {}).get("uid")
        assert uid is None or uid in uids, f"dashboard target uses datasource {uid!r}; provisioned: {uids}"


def test_promql_metric_name_extraction():
    names = promql_metric_names(
        'histogram_quantile(0.99, sum by (api, le) (rate(brook_request_duration_seconds_bucket{api="Fetch"}[$__rate_interval]))) + up{job="brook"} * 1e3'
    )
    assert names == {"brook_request_duration_seconds_bucket", "up"}


# ---------------------------------------------------------------------------------------------
# The brook services as local processes


@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory):
    if paths.target() == "kafka":
        pytest.skip("the compose services run brook")
    if not paths.brook_bin().is_file():
        pytest.fail(f"brook binary not found at {paths.brook_bin()} (set BROOK_BIN)")
    nodes = compose.compose_nodes(load_compose(), tmp_path_factory.mktemp("compose"))
    yield from compose.serve(nodes)


@pytest.fixture
def nodes(request, compose_cluster):
    """The running compose nodes; their log tails are attached to a failing test's report."""
    setattr(request.node, "_brook_brokers", list(compose_cluster))
    return compose_cluster


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _active_controllers(nodes: List[Node]) -> Dict[int, float]:
    out = {}
    for node in nodes:
        values = metric_values(compose.fetch(node.metrics_url), "brook_controller_active")
        assert len(values) == 1, f"{node!r} serves brook_controller_active {values}"
        out[node.node_id] = values[0]
    return out


def test_the_compose_nodes_form_one_cluster(nodes):
    expected = {n.node_id: n.bootstrap for n in nodes}
    admin = _admin(nodes[0].bootstrap)  # one node's address, as a client on the host would
    deadline = time.monotonic() + 15
    while True:
        md = admin.list_topics(timeout=10)
        seen = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
        if seen == expected or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert seen == expected, "Metadata brokers (id: advertised address) differ from the compose nodes"
    assert md.controller_id in expected, f"controller {md.controller_id}"
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert {n.id for n in described.nodes} == set(expected)
    assert described.controller is not None and described.controller.id in expected


def test_exactly_one_node_is_the_active_controller(nodes):
    """brook_controller_active is 1 on one node, 0 on the others; every node's
    brook_controller_leader_id names that node, and so does Metadata's controller id."""
    deadline = time.monotonic() + 10
    while True:
        active = _active_controllers(nodes)
        leaders = [node_id for node_id, v in active.items() if v == 1]
        leader_ids = {n.node_id: metric_values(compose.fetch(n.metrics_url), "brook_controller_leader_id") for n in nodes}
        settled = len(leaders) == 1 and all(v in (0, 1) for v in active.values())
        if (settled and all(v == [leaders[0]] for v in leader_ids.values())) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert settled, f"brook_controller_active per node: {active}"
    assert all(v == [leaders[0]] for v in leader_ids.values()), f"brook_controller_leader_id per node: {leader_ids}"
    assert _admin(nodes[1].bootstrap).list_topics(timeout=10).controller_id == leaders[0]


@pytest.fixture(scope="module")
def traffic(compose_cluster):
    """A 3-partition topic produced to and read back through one node, offsets committed by a
    group: a dict of the topic, its leaders by partition, the records produced, delivered and
    consumed (by partition), delivery errors and any commit error."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    bootstrap = compose_cluster[0].bootstrap
    topic = f"t-compose-{uuid.uuid4().hex[:10]}"
    admin = _admin(bootstrap)
    for fut in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)], operation_timeout=15).values():
        fut.result(timeout=20)
    deadline = time.monotonic() + 10
    while True:
        partitions = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
        leaders = {p: partitions[p].leader for p in partitions}
        if (len(leaders) == 3 and all(v >= 0 for v in leaders.values())) or time.monotonic() > deadline:
            break
        time.sleep(0.2)

    delivered, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or (msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))

    produced = [(i % 3, f"k{i}", f"v{i}") for i in range(RECORDS)]
    for partition, key, value in produced:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
    producer.flush(30)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    consumed: Dict[int, List[Tuple[str, str]]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 20
    while sum(map(len, consumed.values())) < len(delivered) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            consumed[msg.partition()].append((msg.key().decode(), msg.value().decode()))
    commit_error = None
    try:
        consumer.commit(asynchronous=False)  # gives the coordinator a group to report lag for
    except KafkaException as e:
        commit_error = str(e)
    consumer.close()
    return {
        "topic": topic, "leaders": leaders, "produced": produced, "errors": errors,
        "delivered": delivered, "consumed": consumed, "commit_error": commit_error,
    }


def test_a_three_partition_topic_is_produced_and_read_back_through_one_node(nodes, traffic):
    assert traffic["errors"] == [], "delivery errors"
    assert len(traffic["delivered"]) == RECORDS
    leaders = traffic["leaders"]
    assert sorted(set(leaders.values())) == sorted(n.node_id for n in nodes), (
        f"partition leaders {leaders}: a topic of 3 partitions should have one on each broker"
    )
    for partition in range(3):
        expected = [(k, v) for p, k, v in traffic["produced"] if p == partition]
        assert traffic["consumed"][partition] == expected, f"partition {partition} (leader {leaders.get(partition)})"


def test_every_metric_the_dashboard_queries_is_served(nodes, traffic):
    wanted: Dict[str, List[str]] = {}
    for target in dashboard_targets(load_dashboard()):
        for name in promql_metric_names(target["expr"]) - {"up"}:  # `up` is Prometheus' own
            wanted.setdefault(name, []).append(target["expr"])
    assert "brook_controller_active" in wanted, f"dashboard queries {sorted(wanted)}"
    assert traffic["commit_error"] is None, f"committing the group's offsets failed: {traffic['commit_error']}"
    deadline = time.monotonic() + 10  # consumer lag is published every 2 s
    while True:
        served = set().union(*(metric_names_served(compose.fetch(n.metrics_url)) for n in nodes))
        missing = {name: exprs for name, exprs in wanted.items() if name not in served}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not missing, f"the dashboard queries metrics no node serves: {missing}"


def test_a_client_inside_the_network_is_sent_to_the_service_addresses_and_replicas_follow(nodes):
    """A client in another container bootstraps from brook-1's INTERNAL listener: Metadata answers
    with every node's INTERNAL address (brook-N:19092, here 127.0.1.N), and a topic replicated
    on all three nodes over that listener takes acks=all writes with its three replicas in sync."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    internal = {n.node_id: "%s:%d" % named_listener(n.settings, "advertised.listeners", "INTERNAL") for n in nodes}
    assert all(addr.startswith(n.ip + ":") for n, addr in zip(nodes, internal.values())), internal
    bootstrap = internal[nodes[0].node_id]
    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=10)
    assert {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == internal
    topic = f"t-compose-rf3-{uuid.uuid4().hex[:8]}"
    for fut in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)], operation_timeout=15).values():
        fut.result(timeout=20)
    delivered, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, key=f"k{i}", value=f"v{i}",
                         on_delivery=lambda err, msg: (errors if err else delivered).append(err or msg.offset()))
    producer.flush(30)
    assert errors == [] and sorted(delivered) == list(range(20)), (errors, delivered)
    deadline = time.monotonic() + 20
    while True:
        partition = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0]
        if sorted(partition.isrs) == sorted(internal) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted(partition.replicas) == sorted(internal)
    assert sorted(partition.isrs) == sorted(internal), f"in sync: {partition.isrs}"
