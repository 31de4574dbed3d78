"""One fault-injection run: cluster, topic, workload, nemesis, healing, final read, checks, report.

`run_chaos(Options(...))` returns the report (a dict, also written to OUT/report.json);
`report["ok"]` is False on any loss or violation. scripts/chaos.py is its command line,
test_chaos_short.py its short version in the test suite.
"""

import json
import random
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from harness import client_config, paths, security
from harness.cluster import Cluster
from harness.drivers import DriverError, run as driver_run

from . import checker, replicas
from .nemesis import KINDS, Nemesis
from .netfault import NetFaults
from .workload import Burst, GroupConsumer, History, Producer, SharedReads, TailConsumer, now_ms

CHAOS_USER = ("chaos", "chaos-secret")  # the secured run's application login
SESSION_TIMEOUT_MS = 6000  # harness/cluster.py's broker.session.timeout.ms (heartbeat 1000)
CLUSTER_OVERRIDES = {
    "replica.lag.time.max.ms": "10000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "auto.create.topics.enable": "false",
}


@dataclass
class Options:
    target: str = "brook"
    faults: Optional[int] = None  # stop after this many faults ...
    duration_s: Optional[float] = None  # ... or after this long (whichever first)
    seed: int = 0
    out: Optional[Path] = None
    partitions: int = 6
    # Cluster size. 3: the topic's RF, so a reassign fault rotates a partition's replicas (a new
    # preferred leader); more: it swaps a replica for a broker outside the set (a data move).
    nodes: int = 3
    rate: float = 200.0  # records/s per producer
    interval_s: float = 0.0  # quiet time between one fault's recovery and the next fault
    settled: bool = False  # before each fault, wait (up to recovery_timeout_s) for full ISRs
    warmup_s: float = 5.0
    network: str = "auto"  # auto|on|off: isolate faults (netfault.py)
    kinds: Dict[str, int] = field(default_factory=lambda: dict(KINDS))
    burst_records: int = 5000
    burst_size: int = 1024
    recovery_timeout_s: float = 60.0
    final_timeout_s: float = 120.0
    keep: bool = False
    # Every listener secured (harness.security.secure_cluster): the workload's clients log in
    # with SCRAM-SHA-512 over SASL_SSL, brokers replicate over SASL_SSL, the quorum talks mutual
    # TLS; the harness goes in through harness/door.py.
    secured: bool = False
    # "dynamic": the quorum formatted with --initial-controllers (KIP-853), so voters faults can
    # change it; "static": controller.quorum.voters, no voters faults.
    quorum: str = "dynamic"
    # Whether a voters fault may remove the quorum leader itself (a third of them do).
    voters_remove_leader: bool = True


def poll_deadline(done, timeout_s: float, interval_s: float = 0.2) -> bool:
    """Polls `done()` until it is true (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(interval_s)
    return bool(done())


def report_kind(fault: dict) -> str:
    """The fault's kind in the report: a kill-leader that also killed the metadata quorum's
    leader is its own line ("kill-leader+quorum"), since a raft election comes first there."""
    if fault["kind"] == "kill-leader" and fault.get("quorum_leader") == fault["node"]:
        return "kill-leader+quorum"
    return fault["kind"]


def _median_max(values: List[float]) -> dict:
    if not values:
        return {"n": 0}
    return {"n": len(values), "median_ms": round(statistics.median(values)), "max_ms": round(max(values)),
            "min_ms": round(min(values))}


def run_chaos(opts: Options, log: Callable[[str], None] = print) -> dict:
    if opts.faults is None and opts.duration_s is None:
        opts.faults = 30
    rng = random.Random(opts.seed)
    out = Path(opts.out) if opts.out else Path(tempfile.mkdtemp(prefix="brook-chaos-out-"))
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("sends.jsonl", "reads.jsonl", "faults.jsonl", "final.jsonl"):
        (out / stale).unlink(missing_ok=True)
    base = Path(tempfile.mkdtemp(prefix="brook-chaos-"))
    history = History(out)
    cluster = Cluster(opts.target, base, opts.nodes, CLUSTER_OVERRIDES, quorum=opts.quorum)
    config = None  # the workload's --client-config (secured: its SASL_SSL login)
    if opts.secured:
        certs = security.make_certificates(base / "certs", security.CLUSTER_PASSWORD)
        security.secure_cluster(cluster, certs, CHAOS_USER)
        config = str(client_config.write(base / "chaos-client.properties",
                                         security.sasl_ssl_client_settings(certs, "SCRAM-SHA-512", *CHAOS_USER)))

    net = None
    net_note = "off (--network off)"
    if opts.network != "off":
        reason = NetFaults.unavailable_reason()
        if reason is None:
            net = NetFaults()
            try:
                net.wrap(cluster)
                net_note = "on (cgroup-tagged nftables rules on loopback)"
            except (RuntimeError, OSError) as e:
                reason = f"setup failed: {str(e).splitlines()[0]}"
                net.cleanup()
                net = None
        if net is None:
            net_note = f"off ({reason})"
            if opts.network == "on":
                raise RuntimeError(f"network partitions requested but unavailable: {reason}")
    log(f"chaos: target={opts.target} seed={opts.seed} faults={opts.faults} duration={opts.duration_s} "
        f"out={out} data={base}; network partitions {net_note}; secured {opts.secured}; {opts.quorum} quorum")

    topic = f"chaos-{uuid.uuid4().hex[:8]}"
    producers: List[Producer] = []
    consumers: list = []
    bursts: List[Burst] = []
    restarts = {"producers": 0, "consumers": 0}
    shared_reads = SharedReads()
    nemesis = None
    t_begin = time.monotonic()
    started_ms = now_ms()
    try:
        log(f"starting a {opts.nodes}-node {opts.target} cluster")
        cluster.start()
        log(f"cluster up after {time.monotonic() - t_begin:.1f} s: {cluster.bootstrap}")
        bootstrap = cluster.bootstrap  # the workload's way in
        if opts.secured:
            security.wait_scram_users(cluster, [CHAOS_USER])
            bootstrap = security.client_bootstrap(cluster, cluster.node_ids)
            log(f"SCRAM logins (formatted) served; the workload connects over SASL_SSL to {bootstrap}")
        driver_run("java", "create-topic", bootstrap, "--topic", topic, "--partitions", opts.partitions,
                   "--replication-factor", 3, "--config", "min.insync.replicas=2", *config_flag(config), timeout=120)

        def burst():
            b = Burst(bootstrap, topic, f"burst{len(bursts) + 1}", opts.burst_records, opts.burst_size,
                      history, base, config)
            bursts.append(b)
            return b.name

        nemesis = Nemesis(cluster, topic, opts.partitions, rng, net=net,
                          burst=burst if "heavy-restart" in opts.kinds else None,
                          session_s=SESSION_TIMEOUT_MS / 1000, recovery_timeout_s=opts.recovery_timeout_s, kinds=opts.kinds,
                          log=lambda line: log(f"[{time.monotonic() - t_begin:7.1f}s] {line}"),
                          voters_remove_leader=opts.voters_remove_leader)
        deadline = time.monotonic() + 60
        while not nemesis.isr_full() and time.monotonic() < deadline:
            time.sleep(0.2)

        generation = {"java": 1, "franz": 1}

        def new_producer(client):
            prefix = f"{client}{generation[client]}"
            generation[client] += 1
            return Producer(client, bootstrap, topic, opts.partitions, prefix, opts.rate, history, config)

        producers.extend(new_producer(c) for c in ("java", "franz"))
        sessions = {"tail": 1, "group": 1}
        group = f"chaos-group-{uuid.uuid4().hex[:6]}"
        consumers.append(TailConsumer(bootstrap, topic, "tail-franz", 1, history, shared_reads, config))
        consumers.append(GroupConsumer(bootstrap, topic, group, "group-java", 1, history, shared_reads, config))

        def supervise():
            for i, p in enumerate(producers):
                if not p.alive and p.done is None:
                    log(f"  producer {p.prefix} exited ({p.proc.returncode}): {p.stderr_tail(5)!r}; restarting")
                    restarts["producers"] += 1
                    producers.append(new_producer(p.client))
                    p.done = {"exited": p.proc.returncode}
            for i, c in enumerate(consumers):
                if not c.alive and not getattr(c, "replaced", False):
                    c.replaced = True
                    restarts["consumers"] += 1
                    log(f"  consumer {c.name} exited ({c.proc.returncode}): {c.stderr_tail(5)!r}; restarting")
                    sessions[c.kind] += 1
                    if c.kind == "tail":
                        consumers.append(TailConsumer(bootstrap, topic, c.name, sessions["tail"], history, shared_reads,
                                                      config))
                    else:
                        consumers.append(GroupConsumer(bootstrap, topic, group, c.name, sessions["group"], history,
                                                       shared_reads, config))

        # The first fault waits for every producer to be acknowledged on every partition: a JVM
        # still starting would otherwise count its own start-up as the fault's unavailability.
        started = poll_deadline(lambda: all(p.acked_partitions() >= opts.partitions for p in producers), 120)
        if not started:
            raise RuntimeError("the producers were not acknowledged on every partition within 120 s: "
                               + "; ".join(f"{p.prefix}: {p.stderr_tail(5)!r}" for p in producers))
        time.sleep(opts.warmup_s)
        fault_log = open(out / "faults.jsonl", "a")
        try:
            while True:
                if opts.faults is not None and len(nemesis.faults) >= opts.faults:
                    break
                if opts.duration_s is not None and time.monotonic() - t_begin >= opts.duration_s:
                    break
                supervise()
                if opts.settled:
                    # Each fault then meets a healthy cluster: its figure is one failover's,
                    # not the sum of a previous fault's unfinished catch-up and this one.
                    poll_deadline(nemesis.isr_full, opts.recovery_timeout_s)
                fault = nemesis.inject()
                fault_log.write(json.dumps(fault) + "\n")
                fault_log.flush()
                for b in [b for b in bursts if not b.alive and b._index < len(b.values)]:
                    b.finish()
                if opts.interval_s > 0:
                    time.sleep(opts.interval_s)
        finally:
            fault_log.close()
        faults_end = time.monotonic()

        # -- heal, then let the producers run on a healthy cluster a little, then stop them ------------
        log("healing: every node running, no pause, no partition")
        nemesis.heal_all()
        led_deadline = time.monotonic() + opts.recovery_timeout_s
        while not nemesis.all_led() and time.monotonic() < led_deadline:
            time.sleep(0.2)
        # The producers write on the healed cluster before they stop: each has a record sent
        # after every partition was led acknowledged on every partition (or the deadline).
        healed_ms = now_ms()
        supervise()
        written = poll_deadline(lambda: all(p.acked_partitions(since_ms=healed_ms) >= opts.partitions
                                            for p in producers if p.alive), opts.recovery_timeout_s)
        log(f"producers {'acknowledged' if written else 'NOT acknowledged'} on every partition after the heal, "
            f"{time.monotonic() - faults_end:.1f} s after the last fault")
        supervise()
        for p in producers:
            if p.alive:
                p.stop(90)
        for b in bursts:
            b.finish()
        isr_deadline = time.monotonic() + opts.final_timeout_s
        while not nemesis.isr_full() and time.monotonic() < isr_deadline:
            time.sleep(0.5)
        isr_full = nemesis.isr_full()
        heal_to_isr_s = time.monotonic() - faults_end
        log(f"ISRs {'full' if isr_full else 'NOT full'} {heal_to_isr_s:.1f} s after the last fault")

        # -- high watermarks, consumers caught up, final read ---------------------------------------------
        hws = _high_watermarks(bootstrap, topic, opts.partitions, config)
        log(f"high watermarks: {hws}")

        def tail_caught_up():
            best = shared_reads.tail_max()
            return all(best.get(p, -1) >= hw - 1 for p, hw in hws.items() if hw > 0)

        deadline = time.monotonic() + 60
        while not tail_caught_up() and time.monotonic() < deadline:
            supervise()
            time.sleep(0.5)
        # The group consumer is usually a moment behind: until it too reached the high
        # watermarks (it restarts from its last commit after a fault), 10 s at most.
        poll_deadline(lambda: all(max((c.reached.get(p, -1) for c in consumers if c.kind == "group"), default=-1)
                                  >= hw - 1 for p, hw in hws.items() if hw > 0), 10)
        for c in consumers:
            if c.alive:
                c.stop(60)
        final = _final_read(bootstrap, topic, opts.partitions, hws, config)
        with open(out / "final.jsonl", "w") as f:
            for p, recs in sorted(final.items()):
                for o, v in recs:
                    f.write(json.dumps({"partition": p, "offset": o, "value": v}) + "\n")
        # After reassignments the partitions' replica sets are not the ones they were created
        # with: compare the current ones, and check each moved partition ended on a set its
        # moves' outcomes allow (the target once completed, the original once cancelled).
        final_view = nemesis.partition_view() or {}
        replica_sets = {p: list(v["replicas"]) for p, v in final_view.items()}
        unexpected_sets = nemesis.unexpected_replica_sets() if final_view else \
            [{"problem": "no node answered Metadata at the end"}]
        in_progress_at_end = nemesis.reassigner.in_progress() if nemesis.expected_replicas else ""
        if in_progress_at_end:
            log(f"reassignments still listed at the end:\n{in_progress_at_end}")
        replica_check = replicas.compare({n.node_id: n.log_dirs for n in cluster.nodes}, topic, hws,
                                         replica_sets or None)
        # The voter set is whole again (every node, under the directory id it was formatted
        # with) and the topics created while a voter was out are all still there.
        voters_at_end = nemesis.voter_changer.final_check() if nemesis.voter_changer is not None else None
        if voters_at_end is not None:
            log(f"voters at the end: {voters_at_end['voters']} (leader {voters_at_end['leader']}); "
                f"{voters_at_end['topics_created']} topics created while a voter was out, "
                f"missing: {voters_at_end['topics_missing']}")
    finally:
        for proc in [*producers, *consumers, *bursts]:
            if proc.alive:
                proc.kill()
        if net is not None:
            try:
                net.heal()
            except Exception:  # cleanup() below removes the table anyway
                pass
        cluster.stop()
        if net is not None:
            net.cleanup()
        history.close()
        if nemesis is not None:
            shutil.rmtree(nemesis.reassigner.dir, ignore_errors=True)
            if nemesis.voter_changer is not None:
                shutil.rmtree(nemesis.voter_changer.dir, ignore_errors=True)

    sends = [r for p in producers for r in p.records] + [r for b in bursts for r in b.records]
    result = checker.check(sends, shared_reads.index, final, check_unseen=True)
    faults = nemesis.faults
    unavail = checker.unavailability(sends, faults, range(opts.partitions))
    by_kind: Dict[str, List[float]] = {}
    never: Dict[str, int] = {}
    for f, u in zip(faults, unavail):
        f["unavailable_ms"] = u
        if u is None:
            never[report_kind(f)] = never.get(report_kind(f), 0) + 1
        else:
            by_kind.setdefault(report_kind(f), []).append(u)
    # The same per client (its producers only): what each client's application would see.
    by_client: Dict[str, Dict[str, dict]] = {}
    for client in ("java", "franz"):
        own = [r for p in producers if p.client == client for r in p.records]
        kinds: Dict[str, List[float]] = {}
        for f, u in zip(faults, checker.unavailability(own, faults, range(opts.partitions))):
            if u is not None:
                kinds.setdefault(report_kind(f), []).append(u)
        by_client[client] = {k: _median_max(v) for k, v in sorted(kinds.items())}
    with open(out / "faults.jsonl", "w") as fl:
        for f in faults:
            fl.write(json.dumps(f) + "\n")
    kinds_count: Dict[str, int] = {}
    for f in faults:
        kinds_count[f["kind"]] = kinds_count.get(f["kind"], 0) + 1
    violations = dict(result["counts"])
    violations["replica_mismatches"] = len(replica_check["mismatches"])
    violations["replica_sets_unexpected"] = len(unexpected_sets)
    violations["reassignments_in_progress_at_end"] = len((in_progress_at_end or "").splitlines())
    if voters_at_end is not None:
        violations["voter_set_not_full_at_end"] = 0 if voters_at_end["voters_full"] else 1
        violations["voter_topics_missing"] = len(voters_at_end["topics_missing"])
    report = {
        "target": opts.target, "seed": opts.seed, "topic": topic, "partitions": opts.partitions,
        "secured": opts.secured,
        "duration_s": round(time.monotonic() - t_begin, 1), "network_partitions": net_note,
        "faults_total": len(faults), "faults": kinds_count,
        "slow_recoveries": sum(1 for f in faults if f["slow_recovery"]),
        "restart_failures": nemesis.restart_failures,
        "sent": result["sent"], "acked": result["acked"], "failed": result["failed"],
        "failed_but_present": result["failed_but_present"], "final_records": result["final_records"],
        "reads": shared_reads.index.count, "bursts": len(bursts),
        "violations": violations,
        "lost": violations["lost"], "duplicated": violations["duplicated"], "reordered": violations["reordered"],
        "read_then_vanished": violations["read_then_vanished"],
        "unavailability_ms": {k: {**_median_max(v), "never": never.get(k, 0)} for k, v in sorted(by_kind.items())},
        "unavailability_all_ms": _median_max([u for u in unavail if u is not None]),
        "unavailability_by_client_ms": by_client,
        "isr_full_at_end": isr_full, "heal_to_full_isr_s": round(heal_to_isr_s, 1),
        "high_watermarks": hws,
        "replicas": {**{k: v for k, v in replica_check.items() if k not in ("mismatches", "stale_copies")},
                     "stale_copies": len(replica_check["stale_copies"])},
        "replica_sets_at_end": replica_sets, "replica_sets_unexpected": unexpected_sets,
        "reassignments": reassignment_summary(faults),
        "reassignments_in_progress_at_end": in_progress_at_end,
        "quorum": opts.quorum, "voter_changes": voters_summary(faults), "voters_at_end": voters_at_end,
        "replica_mismatch_examples": replica_check["mismatches"][:10],
        "process_restarts": restarts,
        "examples": result["examples"],
        "started_ms": started_ms, "out": str(out), "data_dir": str(base),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
    }
    report["ok"] = all(v == 0 for v in violations.values()) and isr_full
    (out / "report.json").write_text(json.dumps(report, indent=2))
    if not opts.keep and report["ok"]:
        shutil.rmtree(base, ignore_errors=True)
    return report


def reassignment_summary(faults: List[dict]) -> dict:
    """The reassign faults in figures: outcomes, companions, partitions moved (data moves:
    a replica changed broker; the rest changed order only), --execute to moved (median/max)."""
    moves = [f for f in faults if f["kind"] == "reassign"]
    outcomes: Dict[str, int] = {}
    companions: Dict[str, int] = {}
    for f in moves:
        outcomes[f.get("outcome", "?")] = outcomes.get(f.get("outcome", "?"), 0) + 1
        companions[f.get("companion", "?")] = companions.get(f.get("companion", "?"), 0) + 1
    done = [f for f in moves if str(f.get("outcome", "")).startswith("completed")]
    return {"n": len(moves), "outcomes": outcomes, "companions": companions,
            "partitions_moved": sum(len(f.get("partitions", [])) for f in done),
            "data_moves": sum(1 for f in done if f.get("data_move")),
            "elections": sum(1 for f in moves if str(f.get("election", "")).startswith("ok")),
            "move": _median_max([f["move_ms"] for f in done if "move_ms" in f]),
            "execute": _median_max([f["execute_ms"] for f in moves if "execute_ms" in f])}


def voters_summary(faults: List[dict]) -> dict:
    """The voters faults in figures: outcomes, companions, quorum leaders removed, and per step
    (median/max): remove-controller's run, its start to `describe` showing the voter gone, the
    topic created meanwhile, add-controller's first run, its start to the voter shown back."""
    changes = [f for f in faults if f["kind"] == "voters"]
    outcomes: Dict[str, int] = {}
    companions: Dict[str, int] = {}
    for f in changes:
        outcomes[f.get("outcome", "?")] = outcomes.get(f.get("outcome", "?"), 0) + 1
        companions[f.get("companion", "?")] = companions.get(f.get("companion", "?"), 0) + 1
    done = [f for f in changes if f.get("outcome") == "completed"]
    return {"n": len(changes), "outcomes": outcomes, "companions": companions,
            "quorum_leader_removed": sum(1 for f in done if f.get("was_leader")),
            "remove_tool": _median_max([f["remove_tool_ms"] for f in changes if "remove_tool_ms" in f]),
            "gone": _median_max([f["gone_ms"] for f in done]),
            "topic": _median_max([f["topic_ms"] for f in done if "topic" in f]),
            "add_tool": _median_max([f["add_tool_ms"] for f in changes if "add_tool_ms" in f]),
            "back": _median_max([f["back_ms"] for f in done]),
            "remove_attempts_max": max([f.get("remove_attempts", 0) for f in changes] or [0]),
            "add_attempts_max": max([f.get("add_attempts", 0) for f in changes] or [0])}


def config_flag(config: Optional[str]) -> List[str]:
    return ["--client-config", config] if config else []


def _high_watermarks(bootstrap: str, topic: str, partitions: int, config: Optional[str] = None) -> Dict[int, int]:
    for _ in range(10):
        try:
            got = driver_run("franz", "offsets", bootstrap, "--topic", topic, "--spec", "latest", *config_flag(config),
                             timeout=60)
            return {int(p): int(v["offset"]) for p, v in got.items()}
        except DriverError:
            time.sleep(2)
    raise RuntimeError("ListOffsets latest failed 10 times")


def _final_read(bootstrap: str, topic: str, partitions: int, hws: Dict[int, int],
                config: Optional[str] = None) -> Dict[int, list]:
    """Every partition from its first offset up to the high watermark, assign mode (franz-go)."""
    total = sum(hws.values())
    final: Dict[int, list] = {p: [] for p in range(partitions)}
    if total == 0:
        return final
    got = driver_run("franz", "consume", bootstrap, "--topic", topic, "--count", total, "--from", "earliest",
                     "--timeout-ms", 120000, *config_flag(config), timeout=200)
    for r in got:
        final[r["partition"]].append((r["offset"], r["value"]))
    for p in final:
        final[p].sort()
    return final


def summary(report: dict) -> str:
    v = report["violations"]
    lines = [
        f"target {report['target']}{' secured' if report['secured'] else ''}, seed {report['seed']}, "
        f"{report['duration_s']} s, network partitions {report['network_partitions']}",
        f"faults: {report['faults_total']} " + ", ".join(f"{k} {n}" for k, n in sorted(report["faults"].items()))
        + f"; slow recoveries {report['slow_recoveries']}, restart failures {report['restart_failures']}",
        f"records: sent {report['sent']}, acknowledged {report['acked']}, failed {report['failed']} "
        f"({report['failed_but_present']} of them in the log anyway), final log {report['final_records']}, "
        f"consumer reads {report['reads']}",
        "checks: " + ", ".join(f"{k} {n}" for k, n in v.items()),
        f"ISRs full at the end: {report['isr_full_at_end']} ({report['heal_to_full_isr_s']} s after the last fault); "
        f"replicas compared: {report['replicas']}",
    ]
    r = report["reassignments"]
    if r["n"]:
        m, e = r["move"], r["execute"]
        lines.append(f"reassignments: {r['n']}, outcomes {r['outcomes']}, companions {r['companions']}, "
                     f"partitions moved {r['partitions_moved']} ({r['data_moves']} faults moving data), "
                     f"preferred elections {r['elections']}; --execute median {e.get('median_ms')} ms, "
                     f"execute->moved median {m.get('median_ms')} ms, max {m.get('max_ms')} ms; "
                     f"replica sets at the end {report['replica_sets_at_end']}")
    c = report["voter_changes"]
    if c["n"]:
        steps = ", ".join(f"{name} {c[key].get('median_ms')}/{c[key].get('max_ms')} ms"
                          for name, key in (("remove-controller", "remove_tool"), ("removed->gone", "gone"),
                                            ("topic", "topic"), ("add-controller", "add_tool"), ("add->back", "back")))
        lines.append(f"voter changes: {c['n']}, outcomes {c['outcomes']}, companions {c['companions']}, "
                     f"quorum leader removed {c['quorum_leader_removed']}; {steps} (median/max), "
                     f"attempts max: remove {c['remove_attempts_max']}, add {c['add_attempts_max']}")
    if report["voters_at_end"] is not None:
        v_end = report["voters_at_end"]
        lines.append(f"voters at the end: {v_end['voters']} full {v_end['voters_full']}; topics created while a "
                     f"voter was out {v_end['topics_created']}, missing {len(v_end['topics_missing'])}")
    lines.append("time without acknowledgements (fault start -> every partition acked a record sent after it):")
    for kind, s in report["unavailability_ms"].items():
        if s.get("n"):
            lines.append(f"  {kind:19s} n={s['n']:4d} median {s['median_ms']} ms, max {s['max_ms']} ms"
                         + (f", never {s['never']}" if s["never"] else ""))
    a = report["unavailability_all_ms"]
    if a.get("n"):
        lines.append(f"  {'all':19s} n={a['n']:4d} median {a['median_ms']} ms, max {a['max_ms']} ms")
    for client, kinds in report["unavailability_by_client_ms"].items():
        lines.append(f"  {client} producers only: " + ", ".join(
            f"{kind} {s['median_ms']}/{s['max_ms']} ms" for kind, s in kinds.items() if s.get("n")) + " (median/max)")
    for rule, ex in report["examples"].items():
        lines.append(f"  e.g. {rule}: {json.dumps(ex[:3])}")
    for m in report["replica_mismatch_examples"][:5]:
        lines.append(f"  replica mismatch: {json.dumps(m)}")
    for u in report["replica_sets_unexpected"][:5]:
        lines.append(f"  unexpected replica set: {json.dumps(u)}")
    lines.append(f"history and report.json in {report['out']}")
    lines.append("OK" if report["ok"] else "FAILED")
    return "\n".join(lines)


__all__ = ["Options", "run_chaos", "summary", "CLUSTER_OVERRIDES", "paths"]
