"""Client quotas (Kafka's `producer_byte_rate` / `consumer_byte_rate` by user, client id, both and
their defaults), on both targets, one broker per module: a PLAINTEXT listener (the harness, Kafka's
tools; the user is `ANONYMOUS` there) and a SASL_PLAINTEXT one with SCRAM-SHA-512, where the users
alice and bob log in (their credentials set with AlterUserScramCredentials over PLAINTEXT).

- Kafka 4.4's own `kafka-configs --alter/--describe/--delete-config` for users, clients,
  user+client, defaults and ips print exactly what they print against Kafka (entity order and the
  order of values within an entity normalised: Kafka keeps both in hash maps); its refusals carry
  Kafka's messages.
- AlterClientQuotas refusals carry Kafka's INVALID_REQUEST messages and store nothing; ValidateOnly
  stores nothing; DescribeClientQuotas filters (exact, default, any; strict) match as Kafka's; the
  quotas survive a restart (they live in the metadata quorum).
- Precedence (user+client > user+default-client > user > default-user+client >
  default-user+default-client > default-user > client > default-client): each level is added in
  turn, alternately with a tiny and a huge consumer_byte_rate, and a Fetch probe of 64 KB says
  which applies — a throttled fetch returns no data and a non-zero throttle_time_ms (KIP-219),
  an unthrottled one the record. On PLAINTEXT the user is `ANONYMOUS`, as in Kafka.
- `kafka-producer-perf-test` and `kafka-consumer-perf-test` with client.id under a 1 MiB/s quota
  move 12 MiB at <= 1.2 MiB/s with non-zero produce-/fetch-throttle-time-avg, while another
  client id moves the same at twice that or more, never throttled (measured 3-10 MiB/s producing,
  20-45 MiB/s consuming on 2 busy cores; the bound leaves room for a loaded CI machine, and the
  unquotaed run is repeated, 3 runs at most, while the CPU alone holds it below the bound: at load
  18 on 2 cores one producer run on Kafka moved 1.0 MiB/s). Why 12 MiB: Kafka measures a rate
  over 11 one-second samples and never over less than 10 s, so a fresh client may move 10 s worth
  at once before it is throttled, and each sample that ages out frees its bytes again; a run just
  past that first allowance (as on Kafka: measured below) ends on the settled rate.
- The same through real logins: `kafka-configs --entity-type users --entity-name alice
  --add-config producer_byte_rate=1048576,consumer_byte_rate=1048576`, then both perf tools
  logged in as alice (SCRAM-SHA-512, `--command-config`) move 12 MiB at <= 1.2 MiB/s with
  non-zero throttle time, and logged in as bob, under no quota, at twice that or more with none
  (measured at load 6-18 on 2 cores, both targets: alice 0.84-1.0 MiB/s producing and 0.99-1.08
  consuming, bob 3.5-6.2 and 31-55); alice and bob share one client.id, so no client-id quota can
  be what tells them apart. The
  data is complete: each producer run adds exactly its 12 MiB of records to the topic's end
  offset, and each consumer run reads exactly the records of a topic holding 12 MiB.
- `controller_mutation_rate` (KIP-599): partitions created, added or deleted per second, with
  Kafka's token bucket (it starts with 11 s worth). CreateTopics v7, CreatePartitions v3 and
  DeleteTopics v5 refuse each topic after the one that emptied the bucket with
  THROTTLING_QUOTA_EXCEEDED and Kafka's message, and throttle_time_ms the deficit's refill time;
  the connection is then muted that long (KIP-219). Older versions (CreateTopics v4: what
  librdkafka sends) create every topic and answer with throttle_time_ms, which confluent-kafka's
  throttle_cb reports. The Java AdminClient retries a throttled topic after the throttle time
  while its timeout allows, then fails it with ThrottlingQuotaExceededException.
- `request_percentage` (KIP-124): a ProducerPerformance client id under 0.001 % of a thread (100 us
  of handling per 10 s window) sees produce-throttle-time-max > 0 and at most 1 s (Kafka bounds a
  request-quota throttle at one window: measured 1000 ms on both targets), another client id 0.
"""

import json
import re
import socket
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from harness import drivers, kafka_cli, paths, records, security, wire
from harness.wire import A
from harness.broker import HOST, Broker, free_port, serving

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
DEADLINE_S = 15.0
MIB = 1024 * 1024
RECORD_SIZE = 1000
# 12 MiB of 1000-byte records (see the module docstring).
PERF_RECORDS = 12 * MIB // RECORD_SIZE
LOW = 1000          # bytes/s: a 64 KB fetch is 6.4 times over it (measured over 10 s)
HIGH = 1000000000   # bytes/s: never reached here
PROBE_BYTES = 64 * 1024


# SCRAM-SHA-512 logins on the SASL_PLAINTEXT listener, whose user quotas the perf tools meet.
SASL_USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The module's broker: PLAINTEXT (the harness, Kafka's tools, client-id quotas; the user is
    ANONYMOUS there) and SASL_PLAINTEXT with SCRAM-SHA-512 at `sasl_bootstrap` (SASL_USERS)."""
    b = Broker(paths.target(), tmp_path_factory.mktemp("client-quotas"))
    sasl_port = free_port(avoid=frozenset({b.port, b.port + 1, b.metrics_port or 0}))
    b.add_listeners({"SASL_PLAINTEXT": ("SASL_PLAINTEXT", sasl_port, None)})
    b.overrides.update({
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{security.SCRAM_LOGIN} required;",
    })
    b.sasl_bootstrap = f"{HOST}:{sasl_port}"
    b.start()
    yield b
    b.stop()


@pytest.fixture
def broker(request, node):
    return serving(request, node)


@pytest.fixture
def quotas(broker):
    """`set(entity, {key: value})` with AlterClientQuotas (entity: {type: name, None = default}), or
    `set(entity_args, "k=v,...")` with kafka-configs; every key set is removed at teardown, so no
    test's quota throttles the next one."""
    touched = []

    def set_(entity, config):
        if isinstance(entity, dict):
            assert wire.alter_client_quotas(broker.bootstrap, [(entity, config)]) == [(0, None)]
            touched.append((entity, list(config)))
        else:
            configs(broker, "--alter", *entity, "--add-config", config)
            touched.append((entity_of(entity), [kv.split("=")[0] for kv in config.split(",")]))

    yield set_
    for entity, keys in touched:
        wire.alter_client_quotas(broker.bootstrap, [(entity, {k: None for k in keys})])


def entity_of(args):
    """kafka-configs entity arguments as a quota entity."""
    entity, kind = {}, None
    for arg in args:
        if arg in ("--entity-type", "--entity-name", "--entity-default"):
            flag = arg
            if flag == "--entity-default":
                entity[kind] = None
            continue
        if flag == "--entity-type":
            kind = {"users": "user", "clients": "client-id", "ips": "ip"}[arg]
        else:
            entity[kind] = arg
    return entity


def configs(broker, *args, check=True):
    return kafka_cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, *args, check=check)


def described(broker, *entity_args):
    """`--describe` output, each line's values sorted, lines sorted."""
    out = configs(broker, "--describe", *entity_args).stdout
    lines = []
    for line in out.splitlines():
        if not line.strip():
            continue
        head, sep, values = line.partition(" are ")
        lines.append(head + sep + ", ".join(sorted(values.split(", "))) if sep else line)
    return sorted(lines)


def eventually(check, what, deadline_s=DEADLINE_S):
    """Kafka applies quota changes on the broker a moment after the controller commits them."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {deadline_s} s: {what}")
            time.sleep(0.1)


def create_topic(broker, topic):
    kafka_cli.run(TOPICS, "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
                  "--partitions", "1", "--replication-factor", "1")


# ---- kafka-configs -----------------------------------------------------------------------------

USERS_ALICE = ["--entity-type", "users", "--entity-name", "alice"]
ALICE_C1 = USERS_ALICE + ["--entity-type", "clients", "--entity-name", "c1"]
DEFAULT_USER = ["--entity-type", "users", "--entity-default"]
DEFAULT_CLIENT = ["--entity-type", "clients", "--entity-default"]


def test_kafka_configs_alters_describes_and_deletes_quotas_as_on_kafka(broker, quotas):
    quotas(USERS_ALICE, "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    quotas(DEFAULT_CLIENT, "consumer_byte_rate=7000")
    quotas(ALICE_C1, "request_percentage=50")
    # The rest through the wire: each kafka-configs run is a JVM start.
    quotas({"client-id": "c1"}, {"producer_byte_rate": 1000})
    quotas({"user": None}, {"producer_byte_rate": 5000})
    quotas({"ip": None}, {"connection_creation_rate": 10})

    def all_described():
        assert described(broker, "--entity-type", "users") == [
            "Quota configs for the default user-principal are producer_byte_rate=5000.0",
            "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
        ]
    eventually(all_described, "every user quota described")
    assert described(broker, "--entity-type", "clients") == [
        "Quota configs for client-id 'c1' are producer_byte_rate=1000.0",
        "Quota configs for the default client-id are consumer_byte_rate=7000.0",
    ]
    assert described(broker, *USERS_ALICE) == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
    ]
    assert described(broker, *USERS_ALICE, "--entity-type", "clients") == [
        "Quota configs for user-principal 'alice', client-id 'c1' are request_percentage=50.0",
    ]
    assert described(broker, *DEFAULT_USER) == [
        "Quota configs for the default user-principal are producer_byte_rate=5000.0",
    ]
    assert described(broker, "--entity-type", "ips") == [
        "Quota configs for the default ip are connection_creation_rate=10.0",
    ]

    done = configs(broker, "--alter", *USERS_ALICE, "--delete-config", "consumer_byte_rate")
    assert done.stdout.strip() == "Completed updating config for user alice."
    eventually(lambda: _equal(described(broker, *USERS_ALICE), [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0",
    ]), "alice's consumer_byte_rate deleted")
    # Deleting it again: the tool itself finds nothing to delete.
    again = configs(broker, "--alter", *USERS_ALICE, "--delete-config", "consumer_byte_rate", check=False)
    assert again.returncode == 1 and "Invalid config(s): consumer_byte_rate" in again.stdout + again.stderr


def _equal(got, want):
    assert got == want, got


def test_kafka_configs_reports_a_refused_quota_with_kafkas_message(broker):
    refused = configs(broker, "--alter", *USERS_ALICE, "--add-config", "producer_byte_rate=1.5", check=False)
    assert refused.returncode == 1
    assert ("org.apache.kafka.common.errors.InvalidRequestException: producer_byte_rate cannot be a fractional value."
            in refused.stdout + refused.stderr)


INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35


@pytest.mark.parametrize("entity, ops, message", [
    ({"user": "bob"}, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    ({"user": "bob"}, {"producer_byte_rate": 0}, "Quota producer_byte_rate must be greater than 0"),
    ({"user": "bob"}, {"producer_rate": 5}, "Invalid configuration key producer_rate"),
    ({"client-id": "c"}, {"connection_creation_rate": 5}, "Invalid configuration key connection_creation_rate"),
    ({"ip": None}, {"connection_creation_rate": 3e9},
     "Proposed value for connection_creation_rate is too large for an INT."),
    ({"ip": "1.2.3.4", "user": "bob"}, {"producer_byte_rate": 5},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ({"group": "g"}, {"producer_byte_rate": 5}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 5}, "Empty user not supported"),
    ({}, {"producer_byte_rate": 5}, "Invalid empty client quota entity"),
])
def test_alter_client_quotas_refuses_what_kafka_refuses_and_stores_nothing(broker, entity, ops, message):
    assert wire.alter_client_quotas(broker.bootstrap, [(entity, ops)]) == [(INVALID_REQUEST, message)]
    everything = wire.describe_client_quotas(broker.bootstrap, [])
    # Kafka leaves the error message at its default, "" (not null).
    assert everything == {"error": 0, "message": "", "entries": []}


def test_validate_only_checks_and_stores_nothing(broker):
    entries = [({"user": "carol"}, {"producer_byte_rate": 2048}), ({"user": "dave"}, {"producer_byte_rate": -1})]
    # Kafka answers in its result map's order, not the request's.
    assert sorted(wire.alter_client_quotas(broker.bootstrap, entries, validate_only=True), key=repr) == [
        (0, None), (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")]
    assert wire.describe_client_quotas(broker.bootstrap, [])["entries"] == []


def test_describe_filters_match_exact_default_and_any_names(broker, quotas):
    quotas({"user": "erin"}, {"consumer_byte_rate": 1024})
    quotas({"user": "erin", "client-id": None}, {"consumer_byte_rate": 2048})
    quotas({"user": None}, {"consumer_byte_rate": 4096})
    erin = ({"user": "erin"}, {"consumer_byte_rate": 1024.0})
    erin_any = ({"user": "erin", "client-id": None}, {"consumer_byte_rate": 2048.0})
    anyone = ({"user": None}, {"consumer_byte_rate": 4096.0})

    def found(components, strict=False):
        r = wire.describe_client_quotas(broker.bootstrap, components, strict)
        assert r["error"] == 0, r
        return sorted(r["entries"], key=repr)

    def all_three():
        assert found([("user", 2, None)]) == sorted([erin, erin_any, anyone], key=repr)
    eventually(all_three, "the three entities described")
    assert found([("user", 0, "erin")]) == sorted([erin, erin_any], key=repr)
    assert found([("user", 0, "erin")], strict=True) == [erin]
    assert found([("user", 1, None)]) == [anyone]
    assert found([("user", 0, "erin"), ("client-id", 1, None)]) == [erin_any]
    assert found([("client-id", 2, None)], strict=True) == []
    assert wire.describe_client_quotas(broker.bootstrap, [("user", 0, None)]) == {
        "error": INVALID_REQUEST, "message": "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        "entries": None}
    assert wire.describe_client_quotas(broker.bootstrap, [("group", 2, None)]) == {
        "error": UNSUPPORTED_VERSION, "message": "Unsupported entity type group", "entries": None}


# ---- precedence --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def probe_topic(node):
    topic = f"quota-probe-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    p = Producer({"bootstrap.servers": node.bootstrap})
    p.produce(topic, b"x" * PROBE_BYTES)
    assert p.flush(30) == 0
    return topic


def fetch_probe(broker, topic, client_id):
    """One 64 KB Fetch as `client_id`: (throttle_time_ms, bytes of records returned)."""
    r = wire.fetch(broker.bootstrap, {topic: {0: 0}}, max_wait_ms=0, client_id=client_id.encode())
    assert r["error"] == 0, r
    records = r["partitions"].get((topic, 0), {}).get("records", b"")
    return r["throttle_time_ms"], len(records)


def test_quota_precedence_is_kafkas(broker, quotas, probe_topic):
    client = f"probe-{uuid.uuid4().hex[:6]}"
    user = "ANONYMOUS"
    # Lowest precedence first; each level added must win over every one before it.
    levels = [
        ("default client", {"client-id": None}, LOW),
        ("client", {"client-id": client}, HIGH),
        ("default user", {"user": None}, LOW),
        ("default user + default client", {"user": None, "client-id": None}, HIGH),
        ("default user + client", {"user": None, "client-id": client}, LOW),
        ("user", {"user": user}, HIGH),
        ("user + default client", {"user": user, "client-id": None}, LOW),
        ("user + client", {"user": user, "client-id": client}, HIGH),
    ]
    for name, entity, rate in levels:
        quotas(entity, {"consumer_byte_rate": rate})

        def applies():
            throttle_ms, got = fetch_probe(broker, probe_topic, client)
            if rate == LOW:
                assert throttle_ms > 0 and got == 0, (throttle_ms, got)
            else:
                assert throttle_ms == 0 and got > PROBE_BYTES, (throttle_ms, got)
        eventually(applies, f"the {name} quota ({rate} B/s) applies over every level below it")


# ---- perf tools ----------------------------------------------------------------------------------

PRODUCER_SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", re.M)
METRIC = r"^{group}:{name}:\{{client-id={client}\}}\s*: ([\d.]+)$"


def metric(out, group, name, client):
    found = re.search(METRIC.format(group=group, name=re.escape(name), client=re.escape(client)), out, re.M)
    assert found, f"no {group}:{name} for {client} in:\n{out[-3000:]}"
    return float(found.group(1))


def login_args(login):
    """A tool's --command-config for `login` (a client settings file: security.protocol and the
    SASL login), or nothing: PLAINTEXT."""
    return ["--command-config", login] if login else []


def producer_perf(bootstrap, topic, client, login=None):
    """PERF_RECORDS as fast as the broker takes them: (MB/sec, produce-throttle-time-avg ms)."""
    out = kafka_cli.run(PRODUCER_PERF, "--topic", topic, "--num-records", PERF_RECORDS, "--record-size", RECORD_SIZE,
                        "--throughput", -1, *login_args(login), "--producer-props", f"bootstrap.servers={bootstrap}",
                        f"client.id={client}", "--print-metrics", timeout=120).stdout
    sent, _, mb_s = PRODUCER_SUMMARY.findall(out)[-1]
    assert int(sent) == PERF_RECORDS, out[-2000:]
    return float(mb_s), metric(out, "producer-metrics", "produce-throttle-time-avg", client)


def consumer_perf(bootstrap, topic, client, login=None):
    """PERF_RECORDS (or the batch that passes them) from the start of `topic` in a new group:
    (records consumed, fetch.MB.sec, fetch-throttle-time-avg ms)."""
    out = kafka_cli.run(CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic,
                        "--messages", PERF_RECORDS, "--timeout", 60000, "--print-metrics", *login_args(login),
                        "--command-property", f"client.id={client}", timeout=120).stdout
    header = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, " \
             "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    lines = out.splitlines()
    row = lines[lines.index(header) + 1].split(", ")
    consumed, fetch_mb_s = int(row[4]), float(row[8])
    return consumed, fetch_mb_s, metric(out, "consumer-fetch-manager-metrics", "fetch-throttle-time-avg", client)


UNQUOTAED_RUNS = 3


def unquotaed_rate(run, quotaed_mb_s):
    """The rate of `run()` (-> (MiB/s, throttle-time-avg ms)) for a client under no quota, which is
    never throttled: run again, UNQUOTAED_RUNS times at most, while it is below twice
    `quotaed_mb_s`, since on a machine busy with other tests the CPU alone can hold one run of a
    JVM tool there (measured on Kafka at load 18 on 2 cores: 1.0 MiB/s producing); the quota's
    client is measured once. Returns (the fastest MiB/s, runs)."""
    fastest, runs = 0.0, 0
    while runs < UNQUOTAED_RUNS and fastest < 2 * quotaed_mb_s:
        mb_s, throttle = run()
        runs += 1
        assert throttle == 0, f"run {runs} of the unquotaed client was throttled ({throttle} ms on average)"
        fastest = max(fastest, mb_s)
    return fastest, runs


@pytest.fixture(scope="module")
def perf_topic(node):
    topic = f"quota-perf-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    return topic


def test_producer_perf_test_settles_under_its_client_quota(broker, quotas, perf_topic):
    quotas({"client-id": "quota-slow"}, {"producer_byte_rate": MIB})
    slow_mb_s, slow_throttle = producer_perf(broker.bootstrap, perf_topic, "quota-slow")
    fast_mb_s, runs = unquotaed_rate(lambda: producer_perf(broker.bootstrap, perf_topic, "quota-fast"), slow_mb_s)
    print(f"producer: quota-slow {slow_mb_s} MiB/s (throttle avg {slow_throttle} ms), "
          f"quota-fast {fast_mb_s} MiB/s (unthrottled; fastest of {runs})")
    assert slow_mb_s <= 1.2 and slow_throttle > 0
    assert fast_mb_s >= 2 * slow_mb_s
    assert_quota_metrics(broker, "produce", "client-id=quota-slow", PERF_RECORDS * RECORD_SIZE)


def assert_quota_metrics(broker, quota, entity, at_least_bytes):
    """Brook's metrics, labelled by the configured entity that applied (Kafka has JMX instead)."""
    if paths.target() != "brook":
        return
    labels = {"quota": quota, "entity": entity}
    assert broker.metric("brook_quota_throttle_time_seconds_count", **labels) > 0
    assert broker.metric("brook_quota_bytes_total", **labels) >= at_least_bytes


def test_consumer_perf_test_settles_under_its_client_quota(broker, quotas, perf_topic):
    quotas({"client-id": "quota-slow-reader"}, {"consumer_byte_rate": MIB})
    # The topic holds at least 12 MiB whichever test ran first.
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for _ in range(PERF_RECORDS):
        p.produce(perf_topic, b"r" * RECORD_SIZE)
        p.poll(0)
    assert p.flush(60) == 0
    consumed, slow_mb_s, slow_throttle = consumer_perf(broker.bootstrap, perf_topic, "quota-slow-reader")
    fast_mb_s, runs = unquotaed_rate(lambda: consumer_perf(broker.bootstrap, perf_topic, "quota-fast-reader")[1:],
                                     slow_mb_s)
    print(f"consumer: quota-slow-reader {slow_mb_s} MiB/s (throttle avg {slow_throttle} ms), "
          f"quota-fast-reader {fast_mb_s} MiB/s (unthrottled; fastest of {runs})")
    assert consumed >= PERF_RECORDS
    assert slow_mb_s <= 1.2 and slow_throttle > 0
    assert fast_mb_s >= 2 * slow_mb_s
    assert_quota_metrics(broker, "fetch", "client-id=quota-slow-reader", 11.9 * MIB)


# Logged in over SASL: alice is under USER_RATES, bob under no quota; both run with one client id,
# so no client-id quota could be what tells them apart.
USER_RATES = f"producer_byte_rate={MIB},consumer_byte_rate={MIB}"
SHARED_CLIENT_ID = "quota-user-perf"


@pytest.fixture(scope="module")
def logins(node, tmp_path_factory):
    """alice's and bob's SCRAM-SHA-512 credentials, set over PLAINTEXT (no authorizer here) once
    the broker serves them, and their client settings files by name."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                            password.encode()) for user, password in SASL_USERS.items()]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=30)

    def known():
        assert all(security.scram_user_known(node.bootstrap, user) for user in SASL_USERS)
    eventually(known, "alice's and bob's SCRAM credentials served")
    directory = tmp_path_factory.mktemp("client-quotas-logins")
    return {user: security.client_file(directory, user, "SCRAM-SHA-512", user, password)
            for user, password in SASL_USERS.items()}


@pytest.fixture(scope="module")
def full_topic(node):
    """A topic holding exactly PERF_RECORDS records (written over PLAINTEXT, under no quota)."""
    topic = f"quota-user-perf-{uuid.uuid4().hex[:8]}"
    create_topic(node, topic)
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 50, "enable.idempotence": True})
    for _ in range(PERF_RECORDS):
        p.produce(topic, b"u" * RECORD_SIZE)
        p.poll(0)
    assert p.flush(60) == 0
    assert records.end_offset(node.bootstrap, topic, 0) == PERF_RECORDS
    return topic


def test_producer_perf_test_settles_under_its_user_quota(broker, quotas, logins):
    topic = f"quota-user-perf-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    quotas(USERS_ALICE, USER_RATES)
    alice_mb_s, alice_throttle = producer_perf(broker.sasl_bootstrap, topic, SHARED_CLIENT_ID, logins["alice"])
    assert records.end_offset(broker.bootstrap, topic, 0) == PERF_RECORDS
    bob_mb_s, bob_runs = unquotaed_rate(
        lambda: producer_perf(broker.sasl_bootstrap, topic, SHARED_CLIENT_ID, logins["bob"]), alice_mb_s)
    # Every record each run sent is in the topic, once.
    assert records.end_offset(broker.bootstrap, topic, 0) == (1 + bob_runs) * PERF_RECORDS
    print(f"producer: alice {alice_mb_s} MiB/s (throttle avg {alice_throttle} ms), "
          f"bob {bob_mb_s} MiB/s (unthrottled; fastest of {bob_runs})")
    assert alice_mb_s <= 1.2 and alice_throttle > 0
    assert bob_mb_s >= 2 * alice_mb_s
    assert_quota_metrics(broker, "produce", "user=alice", PERF_RECORDS * RECORD_SIZE)


def test_consumer_perf_test_settles_under_its_user_quota(broker, quotas, logins, full_topic):
    quotas(USERS_ALICE, USER_RATES)
    consumed = []

    def read_as(user):
        got, mb_s, throttle = consumer_perf(broker.sasl_bootstrap, full_topic, SHARED_CLIENT_ID, logins[user])
        consumed.append(got)
        return mb_s, throttle
    alice_mb_s, alice_throttle = read_as("alice")
    bob_mb_s, bob_runs = unquotaed_rate(lambda: read_as("bob"), alice_mb_s)
    print(f"consumer: alice {alice_mb_s} MiB/s (throttle avg {alice_throttle} ms), "
          f"bob {bob_mb_s} MiB/s (unthrottled; fastest of {bob_runs})")
    # Each run read the whole topic, no more (it holds exactly PERF_RECORDS).
    assert consumed == [PERF_RECORDS] * (1 + bob_runs)
    assert alice_mb_s <= 1.2 and alice_throttle > 0
    assert bob_mb_s >= 2 * alice_mb_s
    assert_quota_metrics(broker, "fetch", "user=alice", PERF_RECORDS * RECORD_SIZE)


def small_producer_perf(broker, topic, client):
    """A short ProducerPerformance run (100 KB in a few requests): its produce-throttle-time-max."""
    out = kafka_cli.run(PRODUCER_PERF, "--topic", topic, "--num-records", 100, "--record-size", 1000,
                        "--throughput", -1, "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                        f"client.id={client}", "--print-metrics", timeout=120).stdout
    sent = PRODUCER_SUMMARY.findall(out)[-1][0]
    assert int(sent) == 100, out[-2000:]
    return metric(out, "producer-metrics", "produce-throttle-time-max", client)


def test_a_client_past_its_request_percentage_is_throttled_and_another_is_not(broker, quotas, perf_topic):
    # 0.001 % of one thread over the 10 s window is 100 us of handling: a few requests' worth.
    quotas({"client-id": "request-quota-slow"}, {"request_percentage": 0.001})
    slow_throttle = small_producer_perf(broker, perf_topic, "request-quota-slow")
    fast_throttle = small_producer_perf(broker, perf_topic, "request-quota-fast")
    print(f"request_percentage: request-quota-slow throttle max {slow_throttle} ms, "
          f"request-quota-fast {fast_throttle} ms")
    # Kafka bounds a request-quota throttle at one quota window (1 s).
    assert 0 < slow_throttle <= 1000
    assert fast_throttle == 0
    if paths.target() == "brook":
        labels = {"quota": "request", "entity": "client-id=request-quota-slow"}
        assert broker.metric("brook_quota_throttle_time_seconds_count", **labels) > 0


def test_quotas_survive_a_broker_restart(broker, quotas):
    quotas({"user": "frank", "client-id": None}, {"producer_byte_rate": 4096})
    broker.restart()

    def kept():
        r = wire.describe_client_quotas(broker.bootstrap, [("user", 0, "frank")])
        assert r["entries"] == [({"user": "frank", "client-id": None}, {"producer_byte_rate": 4096.0})], r
    eventually(kept, "frank's quota after the restart")


# ---- controller_mutation_rate ---------------------------------------------------------------------

THROTTLING_QUOTA_EXCEEDED = 89
THROTTLING_MESSAGE = "The throttling quota has been exceeded."
MUTATION_RATE = 2.0  # partitions/s: the bucket starts with 11 s of it, 22 partitions

_CREATE_V7_REQ = [("topics", ("carray", [("name", "cstring"), ("num_partitions", "int32"),
                                         ("replication_factor", "int16"),
                                         ("assignments", ("carray", [("partition_index", "int32"),
                                                                     ("broker_ids", ("carray", "int32")),
                                                                     ("tags", "tags")])),
                                         ("configs", ("carray", [("name", "cstring"), ("value", "cnstring"),
                                                                 ("tags", "tags")])),
                                         ("tags", "tags")])),
                  ("timeout_ms", "int32"), ("validate_only", "bool"), ("tags", "tags")]
_CREATE_V7_RESP = [("throttle_time_ms", "int32"),
                   ("topics", ("carray", [("name", "cstring"), ("topic_id", "uuid"), ("error_code", "int16"),
                                          ("error_message", "cnstring"), ("num_partitions", "int32"),
                                          ("replication_factor", "int16"),
                                          ("configs", ("carray", [("name", "cstring"), ("value", "cnstring"),
                                                                  ("read_only", "bool"), ("config_source", "int8"),
                                                                  ("is_sensitive", "bool"), ("tags", "tags")])),
                                          ("tags", "tags")])),
                   ("tags", "tags")]
_CREATE_V4_REQ = [("topics", A([("name", "string"), ("num_partitions", "int32"), ("replication_factor", "int16"),
                                ("assignments", A([("partition_index", "int32"), ("broker_ids", A("int32"))])),
                                ("configs", A([("name", "string"), ("value", "nstring")]))])),
                  ("timeout_ms", "int32"), ("validate_only", "bool")]
_CREATE_V4_RESP = [("throttle_time_ms", "int32"),
                   ("topics", A([("name", "string"), ("error_code", "int16"), ("error_message", "nstring")]))]


_DELETE_V5_REQ = [("topic_names", ("carray", "cstring")), ("timeout_ms", "int32"), ("tags", "tags")]
_DELETE_V5_RESP = [("throttle_time_ms", "int32"),
                   ("responses", ("carray", [("name", "cstring"), ("error_code", "int16"),
                                             ("error_message", "cnstring"), ("tags", "tags")])),
                   ("tags", "tags")]
_CREATE_PARTITIONS_V3_REQ = [("topics", ("carray", [("name", "cstring"), ("count", "int32"),
                                                    ("assignments", ("carray", [("broker_ids", ("carray", "int32")),
                                                                                ("tags", "tags")])),
                                                    ("tags", "tags")])),
                             ("timeout_ms", "int32"), ("validate_only", "bool"), ("tags", "tags")]
_CREATE_PARTITIONS_V3_RESP = [("throttle_time_ms", "int32"),
                              ("results", ("carray", [("name", "cstring"), ("error_code", "int16"),
                                                      ("error_message", "cnstring"), ("tags", "tags")])),
                              ("tags", "tags")]


def drained_mutation_quota(broker, quotas) -> str:
    """A fresh client id under MUTATION_RATE whose bucket was just emptied (about 0 tokens).
    Kafka's controller applies a quota up to a second or so after AlterClientQuotas answers, and
    until then counts nothing; so a validate-only CreateTopics v4 of one partition more than the
    bucket holds is sent until it comes back throttled (the bucket then at -1), and the client
    waits its throttle time out, as KIP-219 asks of it (the bucket refills to 0)."""
    client = f"mutator-{uuid.uuid4().hex[:6]}"
    quotas({"client-id": client}, {"controller_mutation_rate": MUTATION_RATE})
    request = _create_request([(f"{client}-never", int(11 * MUTATION_RATE) + 1)])
    request["validate_only"] = True
    deadline = time.monotonic() + DEADLINE_S
    while True:
        r = wire.call(broker.bootstrap, 19, 4, _CREATE_V4_REQ, request, _CREATE_V4_RESP, client_id=client.encode())
        if r["throttle_time_ms"] > 0:
            break
        assert time.monotonic() < deadline, f"the controller_mutation_rate of {client} never applied"
        time.sleep(0.1)
    assert r["throttle_time_ms"] <= 1000 / MUTATION_RATE, r
    time.sleep(r["throttle_time_ms"] / 1000)
    return client


def mutation_quota(broker, quotas) -> str:
    """A fresh client id under MUTATION_RATE, once the quota is in force. Kafka's controller
    applies quota records a moment after AlterClientQuotas answers (later than DescribeClientQuotas
    shows them), and a probe of the quota would spend its tokens; so a second client id gets the
    same quota after it, and is probed until it is throttled: the metadata log applies in order."""
    client = f"mutator-{uuid.uuid4().hex[:6]}"
    quotas({"client-id": client}, {"controller_mutation_rate": MUTATION_RATE})
    probe = f"{client}-probe"
    quotas({"client-id": probe}, {"controller_mutation_rate": MUTATION_RATE})
    request = _create_request([(f"{probe}-never", 100)])
    request["validate_only"] = True

    def probe_throttled():
        r = wire.call(broker.bootstrap, 19, 4, _CREATE_V4_REQ, request, _CREATE_V4_RESP, client_id=probe.encode())
        return r["throttle_time_ms"] > 0
    eventually(probe_throttled, f"the controller_mutation_rate of {probe} is in force")
    return client


def _create_request(topics):
    return {"topics": [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
                       for n, p in topics], "timeout_ms": 30000, "validate_only": False}


def admin_connection(broker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def create_v7(s, client, topics):
    """CreateTopics v7 (strict) of `topics` [(name, partitions)] on `s`: (throttle_time_ms, {name:
    (error_code, error_message)})."""
    r = wire._exchange(s, 19, 7, _CREATE_V7_REQ, _create_request(topics), _CREATE_V7_RESP, True,
                       client.encode())
    return r["throttle_time_ms"], {t["name"]: (t["error_code"], t["error_message"]) for t in r["topics"]}


def test_strict_create_topics_refuses_the_topics_past_the_controller_mutation_quota(broker, quotas):
    client = drained_mutation_quota(broker, quotas)
    base = f"mutation-{uuid.uuid4().hex[:6]}"
    with admin_connection(broker) as s:
        # The check is before each topic: with the bucket at about 0 the first topic goes
        # through and leaves about -4; the second is refused, 2 s of refill short.
        throttle, results = create_v7(s, client, [(f"{base}-a", 4), (f"{base}-b", 1)])
        # Kafka names no message for a throttled topic (nor do its DeleteTopics and
        # CreatePartitions).
        assert results == {f"{base}-a": (0, None), f"{base}-b": (THROTTLING_QUOTA_EXCEEDED, None)}, results
        assert 1500 <= throttle <= 2000, throttle
        # KIP-219: the connection reads nothing more until the throttle time has passed (the
        # request sent meanwhile names an existing topic: refused before the quota counts).
        started = time.monotonic()
        _, again = create_v7(s, client, [(f"{base}-a", 1)])
        assert time.monotonic() - started >= throttle / 1000 - 0.2
        assert again[f"{base}-a"][0] == 36, again  # TOPIC_ALREADY_EXISTS
    topics = set(records.admin(broker.bootstrap).list_topics(timeout=10).topics)
    assert f"{base}-a" in topics and f"{base}-b" not in topics


def test_strict_delete_topics_counts_each_topics_partitions(broker, quotas):
    names = [f"mutation-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    for name in names:
        assert wire.create_topics(broker.bootstrap, {name: (4, 1, {})}) == {name: 0}
    client = drained_mutation_quota(broker, quotas)
    with admin_connection(broker) as s:
        # One of the three (Kafka deletes in no set order) takes the bucket to about -4; the
        # other two are refused.
        r = wire._exchange(s, 20, 5, _DELETE_V5_REQ, {"topic_names": names, "timeout_ms": 30000},
                           _DELETE_V5_RESP, True, client.encode())
    got = sorted((t["error_code"], t["error_message"]) for t in r["responses"])
    assert got == [(0, None)] + [(THROTTLING_QUOTA_EXCEEDED, None)] * 2, r
    assert 1500 <= r["throttle_time_ms"] <= 2000, r
    refused = {t["name"] for t in r["responses"] if t["error_code"]}
    assert set(records.admin(broker.bootstrap).list_topics(timeout=10).topics) & set(names) == refused


def test_strict_create_partitions_counts_the_partitions_added(broker, quotas):
    names = [f"mutation-{uuid.uuid4().hex[:6]}-{i}" for i in range(2)]
    for name in names:
        assert wire.create_topics(broker.bootstrap, {name: (1, 1, {})}) == {name: 0}
    client = drained_mutation_quota(broker, quotas)
    with admin_connection(broker) as s:
        # Each adds 4: whichever Kafka takes first (in no set order) leaves the bucket at about
        # -4, the other is refused.
        r = wire._exchange(s, 37, 3, _CREATE_PARTITIONS_V3_REQ,
                           {"topics": [{"name": n, "count": 5, "assignments": None} for n in names],
                            "timeout_ms": 30000, "validate_only": False},
                           _CREATE_PARTITIONS_V3_RESP, True, client.encode())
    got = sorted((t["error_code"], t["error_message"]) for t in r["results"])
    assert got == [(0, None), (THROTTLING_QUOTA_EXCEEDED, None)], r
    assert 1500 <= r["throttle_time_ms"] <= 2000, r
    grown = {t["name"]: 5 if t["error_code"] == 0 else 1 for t in r["results"]}
    assert {n: records.partition_count(broker.bootstrap, n) for n in names} == grown


def test_permissive_create_topics_creates_every_topic_and_throttles(broker, quotas):
    client = drained_mutation_quota(broker, quotas)
    base = f"mutation-{uuid.uuid4().hex[:6]}"
    r = wire.call(broker.bootstrap, 19, 4, _CREATE_V4_REQ, _create_request([(f"{base}-a", 2), (f"{base}-b", 2)]),
                  _CREATE_V4_RESP, client_id=client.encode())
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [(f"{base}-a", 0), (f"{base}-b", 0)], r
    assert 1500 <= r["throttle_time_ms"] <= 2000, r
    # librdkafka sends CreateTopics v4: confluent-kafka creates the topic and reports the throttle.
    client = drained_mutation_quota(broker, quotas)
    throttles = []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": client,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    admin.create_topics([NewTopic(f"{base}-c", 4, 1)])[f"{base}-c"].result(timeout=30)
    deadline = time.monotonic() + DEADLINE_S
    while not throttles and time.monotonic() < deadline:
        admin.poll(0.2)
    assert throttles and 1.0 <= throttles[0] <= 2.0, throttles


def test_the_java_admin_client_gets_throttling_quota_exceeded_past_its_timeout(broker, quotas, tmp_path):
    """One Java AdminClient creates topics of 10 partitions one after another: three go through
    (22 tokens, then 12, then 2: the check is before each), the fourth is refused for 4 s of
    refill, longer than its 3 s timeout, so the client (which retries a throttled topic after
    the throttle time while its timeout allows) fails it with ThrottlingQuotaExceededException."""
    client = mutation_quota(broker, quotas)
    config = tmp_path / "admin.properties"
    config.write_text(f"client.id={client}\n")
    prefix = f"mutation-{uuid.uuid4().hex[:6]}"
    out = subprocess.run(
        [*drivers.DRIVER_ARGV["java"], "create-topics-loop", "--bootstrap", broker.bootstrap, "--client-config",
         str(config), "--prefix", prefix, "--partitions", "10", "--max-count", "4", "--interval-ms", "0",
         "--timeout-ms", "3000"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    attempts = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [a["ok"] for a in attempts] == [True, True, True, False], attempts
    assert attempts[3]["error"] == "ThrottlingQuotaExceededException", attempts[3]
    assert THROTTLING_MESSAGE in attempts[3]["message"], attempts[3]
    assert set(records.admin(broker.bootstrap).list_topics(timeout=10).topics) & {a["topic"] for a in attempts} == \
        {a["topic"] for a in attempts[:3]}
