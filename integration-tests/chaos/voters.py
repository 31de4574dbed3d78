"""Controller voter changes as a nemesis fault (issue #27 item 3, KIP-853): Kafka's own
`kafka-metadata-quorum --bootstrap-controller … remove-controller / add-controller` take a
voter out of the metadata quorum and put it back while the workload produces.

Needs the cluster formatted as a dynamic quorum (harness/cluster.py `quorum="dynamic"`: every
node formatted with `--initial-controllers`, so `cluster.directory_ids` names each voter's
metadata directory). One fault:

  1. `describe --status`: the voters and the leader. Only with every node running and a voter
     does it remove one (3 controllers: one at a time, never below a majority of live voters);
     a voter missing from an earlier fault that did not finish is added back instead.
  2. `remove-controller --controller-id N --controller-directory-id D` for a voter: the quorum
     leader a third of the time (unless `remove_leader` is off), else another one; polled through `describe --status` until N is gone and
     a leader among the others is shown (gone_ms, from the tool's start).
  3. While N is out (an observer of the metadata log, its broker still serving), a topic is
     created through the brokers (topic_ms): the two remaining voters commit metadata. The run
     checks at the end that every such topic is still listed.
  4. `add-controller` with N's own properties (`--command-config`: its node id, controller
     listener, and the metadata directory whose meta.properties holds its directory id), retried
     while the leader refuses it (an observer not caught up yet, another change in progress), then
     polled until `describe` shows N a voter again (back_ms, from the first attempt).

A companion may strike half the time: kill -9 of N while one of the two tools runs (a random
0.5-3 s after the tool's JVM starts; it needs 1-3 s to send its request, so the kill lands before,
during or just after the change), N restarted after 0.5-2.5 s. Only N is killed: while it changes,
the other two voters keep a majority of the old and of the new voter set alike.

A step that does not finish by the deadline (recovery_timeout_s, at least 60 s) is logged and the fault ends
"unsettled"; the next voters fault, and at the latest the run's final heal (`settle`), adds the
missing voter back. `final_check` gives the voter set at the end (it must be every node, each
with its formatted directory id) and the topics created while a voter was out that are missing.

The tool is a JVM (2-4 s per call on a shared machine); describe polls run one after another.
Tool calls go only to controllers of nodes that run and are reachable (a paused node would hang
the admin client).
"""

import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from confluent_kafka.admin import AdminClient, NewTopic

from harness import door, kafka_cli
from harness.cluster import QUORUM_TOOL, parse_quorum_status


# A JVM tool run: 2-4 s on a quiet machine; past 45 s seen on a loaded one (load 40 on 2 cores).
TOOL_TIMEOUT_S = 120
# A step's deadline is the run's recovery timeout, but never below this: a step is two JVM runs
# (the change, then describe), 2-4 s each on a quiet machine, 15 s and more on a loaded one.
MIN_STEP_TIMEOUT_S = 60
COMPANIONS = ("none", "none", "kill-during-remove", "kill-during-add")
# Refusals that mean "not yet", so add-controller is tried again: the observer is not caught up
# (Kafka: "lagging behind"), another voter change or the leader's first commit is pending, the
# leader moved or the request timed out.
RETRIABLE = ("lagging", "not ready", "TimeoutException", "RequestTimedOut", "REQUEST_TIMED_OUT",
             "NotLeader", "NOT_LEADER", "NotController", "NOT_CONTROLLER", "in progress",
             "UnknownServerException", "Disconnect", "Connection", "timed out")


def error_line(text: str) -> str:
    """What went wrong, from a tool's output: the last line naming an exception or error that
    is not a stack frame (e.g. `java.util.NoSuchElementException: No value present`), else the
    last line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    named = [ln for ln in lines if not ln.startswith("at ") and ("Exception" in ln or "Error" in ln)]
    return (named or lines or [""])[-1][:300]


def voter_directory_ids(describe_status: str) -> Dict[int, Optional[str]]:
    """{id: directoryId} of the CurrentVoters line of `describe --status` (Kafka's tool prints
    `[{"id": 1, "directoryId": "…", "endpoints": [...]}, ...]`, `null` for no directory id)."""
    for line in describe_status.splitlines():
        if line.strip().startswith("CurrentVoters:"):
            return {int(i): (None if d == "null" else d.strip('"'))
                    for i, d in re.findall(r'"id":\s*(-?\d+),\s*"directoryId":\s*("[^"]*"|null)', line)}
    return {}


class VoterChanger:
    """The `voters` fault for the nemesis (chaos/nemesis.py gives itself: its cluster, rng,
    reachable nodes and node restarts)."""

    def __init__(self, nemesis, log: Callable[[str], None], remove_leader: bool = True):
        self.nemesis, self.cluster, self.log = nemesis, nemesis.cluster, log
        self.remove_leader = remove_leader
        self.dir = Path(tempfile.mkdtemp(prefix="brook-chaos-voters-"))
        self.topics: List[str] = []  # created (acknowledged) while a voter was out
        self._topic_n = 0
        self.last_seen = ""  # the last describe's voters and leader, or how it failed

    # -- the tool ------------------------------------------------------------------------------------
    def _client_settings(self) -> Dict[str, str]:
        """What the tool's admin client needs to reach a controller listener: nothing for
        PLAINTEXT, the node's TLS key and trust for SSL (harness.security: mutual TLS, the node
        certificate's subject is a super user)."""
        settings = self.cluster.nodes[0].settings()
        protocols = dict(kv.split(":", 1) for kv in settings.get("listener.security.protocol.map", "").split(",") if kv)
        if protocols.get("CONTROLLER", "PLAINTEXT") == "PLAINTEXT":
            return {}
        return {"security.protocol": protocols["CONTROLLER"],
                **{k: v for k, v in settings.items() if k.startswith("ssl.") and "client.auth" not in k}}

    def _properties(self, node_id: Optional[int]) -> Optional[Path]:
        """The tool's --command-config: node `node_id`'s own settings (add-controller reads its id,
        controller listener and log.dirs there) plus the client settings; or the client settings
        alone (None when there are none)."""
        settings = dict(self.cluster.node(node_id).settings()) if node_id is not None else {}
        settings.update(self._client_settings())
        if not settings:
            return None
        path = self.dir / f"{'node-%d' % node_id if node_id is not None else 'client'}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return path

    def _up(self) -> List[int]:
        """Running nodes neither paused nor isolated (the nemesis's `_reachable()` without its
        shuffle: polls here draw nothing from the seeded RNG)."""
        net = self.nemesis.net
        return [i for i in self.cluster.running_ids()
                if i not in self.nemesis.paused and (net is None or net.isolated != i)]

    def _controllers(self) -> str:
        ids = self._up() or self.cluster.node_ids
        return ",".join(f"{self.cluster.node(i).host}:{self.cluster.node(i).controller_port}" for i in ids)

    def tool(self, *args, config_of: Optional[int] = None) -> (bool, str, int):
        """(exit 0, output, ms) of one kafka-metadata-quorum run; a timeout is a failure."""
        config = self._properties(config_of)
        argv = ["--bootstrap-controller", self._controllers(), *(["--command-config", config] if config else []), *args]
        t0 = time.monotonic()
        try:
            proc = kafka_cli.run(QUORUM_TOOL, *argv, timeout=TOOL_TIMEOUT_S, check=False)
            ok, text = proc.returncode == 0, proc.stdout + proc.stderr
        except kafka_cli.CliError as e:
            ok, text = False, e.stdout + e.stderr
        return ok, text, round((time.monotonic() - t0) * 1000)

    def status(self) -> Optional[dict]:
        """`describe --status` parsed, with "voters" {id: directoryId}; None if the tool failed."""
        ok, text, ms = self.tool("describe", "--status")
        try:
            status = parse_quorum_status(text) if ok else None
        except ValueError:
            status = None
        if status is None:
            self.last_seen = f"describe failed after {ms} ms: {error_line(text)}"
            return None
        status["voters"] = voter_directory_ids(text)
        self.last_seen = f"voters {sorted(status['voters'])} leader {status['LeaderId']} ({ms} ms)"
        return status

    def _wait_status(self, done, timeout_s: float, fault: Optional[dict] = None, step: str = "") -> Optional[dict]:
        """Polls describe until `done(status)`; the status that satisfied it, or None (then the
        fault records what the last describe showed)."""
        deadline = time.monotonic() + timeout_s
        polls = 0
        while True:
            s = self.status()
            polls += 1
            if s is not None and done(s):
                return s
            if time.monotonic() >= deadline:
                if fault is not None:
                    fault[f"{step}_last_seen"] = f"{self.last_seen}, {polls} describes"
                return None
            time.sleep(0.5)

    # -- one fault -------------------------------------------------------------------------------------
    def run(self, fault: dict, timeout_s: float) -> None:
        """One voters fault (module doc); fills `fault` with what it did and each step's time."""
        timeout_s = max(timeout_s, MIN_STEP_TIMEOUT_S)
        status = self.status()
        if status is None:
            fault.update(outcome="skipped (describe --status failed)", describe_error=self.last_seen)
            return
        voters = sorted(status["voters"])
        fault["voters_before"], fault["quorum_leader"] = voters, status["LeaderId"]
        missing = [n for n in self.cluster.node_ids if n not in voters]
        if missing:  # an earlier change did not finish: one change at a time, this one first
            node_id = missing[0]
            fault.update(node=node_id, action="add back", companion="none")
            fault["outcome"] = "added back" if self._add(fault, node_id, None, timeout_s) else "add unsettled"
            return
        if sorted(self.cluster.running_ids()) != self.cluster.node_ids or len(self._up()) < len(voters):
            fault["outcome"] = "skipped (not every node up)"
            return
        rng = self.nemesis.rng
        leader = status["LeaderId"]
        others = [v for v in voters if v != leader]
        if not others or (self.remove_leader and leader in voters and rng.random() < 1 / 3):
            node_id = leader
        else:
            node_id = rng.choice(others)
        companion = rng.choice(COMPANIONS)
        fault.update(node=node_id, action="remove and add", was_leader=node_id == leader, companion=companion)
        if not self._remove(fault, node_id, companion == "kill-during-remove", timeout_s):
            fault["outcome"] = "remove unsettled"
            return
        self._create_topic(fault)
        ok = self._add(fault, node_id, "kill-during-add" if companion == "kill-during-add" else None, timeout_s)
        fault["outcome"] = "completed" if ok else "add unsettled"

    def _with_companion(self, fault: dict, node_id: int, step: str, call) -> (bool, str, int):
        """`call()` (a tool run) with a kill -9 of `node_id` a random 0.5-3 s after it began."""
        result = {}
        thread = threading.Thread(target=lambda: result.update(r=call()), daemon=True)
        t0 = time.monotonic()
        thread.start()
        time.sleep(self.nemesis.rng.uniform(0.5, 3.0))
        fault["kill_after_ms"] = round((time.monotonic() - t0) * 1000)
        fault["kill_step"] = step
        self.cluster.node(node_id).kill()
        time.sleep(self.nemesis._down_time())
        self.nemesis._start(node_id, fault)
        thread.join(TOOL_TIMEOUT_S + 30)
        return result.get("r", (False, "tool thread did not finish", round((time.monotonic() - t0) * 1000)))

    def _change(self, fault: dict, node_id: int, step: str, args: tuple, config_of: Optional[int], kill: bool,
                done_text: tuple, timeout_s: float) -> None:
        """Runs the remove or add tool until it succeeds, says the change is already made
        (`done_text`: an earlier attempt that timed out got through), fails for good, or the
        deadline passes; retriable refusals (RETRIABLE: a change or the leader's first commit
        pending, an observer not caught up, a leader moving) are tried again a second later."""
        deadline = time.monotonic() + timeout_s
        attempts, errors = 0, []
        while True:
            attempts += 1
            call = (lambda: self.tool(*args, config_of=config_of))
            ok, text, ms = self._with_companion(fault, node_id, step, call) if kill and attempts == 1 else call()
            fault.setdefault(f"{step}_tool_ms", ms)
            if ok or any(t in text for t in done_text):
                break
            errors.append(error_line(text))
            if time.monotonic() >= deadline or not any(r in text for r in RETRIABLE):
                break
            time.sleep(1.0)
        fault[f"{step}_attempts"] = attempts
        if errors:
            fault[f"{step}_errors"] = errors[-3:]

    def _remove(self, fault: dict, node_id: int, kill: bool, timeout_s: float) -> bool:
        """remove-controller, then until describe shows `node_id` gone and a leader among the rest."""
        directory_id = self.cluster.directory_ids[node_id]
        # `=`: a directory id may start with '-', which the tool's parser would take for an option.
        args = ("remove-controller", "--controller-id", node_id, f"--controller-directory-id={directory_id}")
        t0 = time.monotonic()
        self._change(fault, node_id, "remove", args, None, kill, ("VoterNotFound", "VOTER_NOT_FOUND"), timeout_s)
        s = self._wait_status(lambda s: node_id not in s["voters"] and s["LeaderId"] in s["voters"],
                              max(5.0, t0 + timeout_s - time.monotonic()), fault, "gone")
        fault["gone_ms"] = round((time.monotonic() - t0) * 1000)
        if s is None:
            self.log(f"  voter {node_id}: not shown removed within {timeout_s:.0f} s "
                     f"({(fault.get('remove_errors') or ['tool ok'])[-1]}; last describe: {fault['gone_last_seen']})")
            return False
        fault["voters_while_out"], fault["leader_while_out"] = sorted(s["voters"]), s["LeaderId"]
        return True

    def _add(self, fault: dict, node_id: int, companion: Optional[str], timeout_s: float) -> bool:
        """add-controller with the node's own properties (a DUPLICATE_VOTER answer means an earlier
        attempt got through), then until describe shows `node_id` a voter."""
        t0 = time.monotonic()
        self._change(fault, node_id, "add", ("add-controller",), node_id, companion is not None,
                     ("already part of the set of voters", "DuplicateVoter"), timeout_s)
        s = self._wait_status(lambda s: node_id in s["voters"] and s["LeaderId"] in s["voters"],
                              max(5.0, t0 + timeout_s - time.monotonic()), fault, "back")
        fault["back_ms"] = round((time.monotonic() - t0) * 1000)
        if s is None:
            self.log(f"  voter {node_id}: not a voter again within {timeout_s:.0f} s "
                     f"({(fault.get('add_errors') or ['tool ok'])[-1]}; last describe: {fault['back_last_seen']})")
            return False
        fault["voters_after"] = sorted(s["voters"])
        return True

    def _create_topic(self, fault: dict) -> None:
        """One topic through the brokers while a voter is out: metadata commits on the others."""
        self._topic_n += 1
        name = f"{self.nemesis.topic}-voters-{self._topic_n}"
        bootstrap = ",".join(self.cluster.bootstrap_of(i) for i in self._up())
        t0 = time.monotonic()
        try:
            admin = AdminClient(door.admin_config(bootstrap))
            admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(timeout=60)
            self.topics.append(name)
            fault["topic"] = name
        except Exception as e:  # noqa: BLE001 - not acknowledged: not counted, the fault goes on
            fault["topic_error"] = str(e)[:300]
        fault["topic_ms"] = round((time.monotonic() - t0) * 1000)

    # -- the end of the run ------------------------------------------------------------------------------
    def settle(self, timeout_s: float) -> None:
        """The final heal's part (every node runs): add back every node that is not a voter."""
        timeout_s = max(timeout_s, MIN_STEP_TIMEOUT_S)
        status = self._wait_status(lambda s: True, timeout_s)
        for node_id in [n for n in self.cluster.node_ids if status is not None and n not in status["voters"]]:
            self.log(f"  voter {node_id} missing at the final heal: adding it back")
            self._add({}, node_id, None, timeout_s)

    def final_check(self, timeout_s: float = 60) -> dict:
        """The voter set at the end (every node, each with its formatted directory id) and the
        topics created while a voter was out that the brokers no longer list."""
        expected = {n: self.cluster.directory_ids[n] for n in self.cluster.node_ids}
        status = self._wait_status(lambda s: s["voters"] == expected, timeout_s) or self.status()
        voters = status["voters"] if status else {}
        listed: set = set()
        try:
            admin = AdminClient(door.admin_config(self.cluster.bootstrap))
            listed = set(admin.list_topics(timeout=30).topics)
        except Exception as e:  # noqa: BLE001 - then every topic counts as missing, and says why
            self.log(f"  listing topics failed: {e}")
        return {"voters": {str(k): v for k, v in sorted(voters.items())},
                "leader": status["LeaderId"] if status else None,
                "voters_full": voters == expected,
                "topics_created": len(self.topics),
                "topics_missing": sorted(set(self.topics) - listed)}


__all__ = ["VoterChanger", "voter_directory_ids", "error_line"]
