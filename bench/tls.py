"""`make bench-tls` (issue 25, "Measure"): what TLS + SASL and the ACL authorizer cost, Brook
beside Apache Kafka 4.4, with Kafka's own perf tools and a franz-go client. A command for
people, never a CI gate.

    python3 bench/tls.py [--quick] [--rounds N] [--records N] [--acls N] [--servers kafka,brook]
                         [--client perf|franz|both]

Each round starts, for each broker, two fresh single-node servers (one at a time, data under
--data-dir):
1. TLS: a PLAINTEXT listener (readiness, topic and user set-up, the plaintext figures) and a
   SASL_SSL one (SCRAM-SHA-512, the PEM key store of scripts/certs.sh), configured with the same
   Kafka keys on both. The clients pin TLS 1.3 and TLS_AES_128_GCM_SHA256, so both brokers do the
   same cipher work (unpinned, JSSE and rustls would both pick AES-256-GCM, but nothing would
   guarantee they agree); the brokers get ssl.cipher.suites too, for the Go client (see
   broker_settings). 1 KB records: produce over SASL_SSL, then fetch that topic over
   PLAINTEXT and over SASL_SSL (same data, already in the page cache, so the ratio is what TLS
   costs the fetch, the consumer's decryption on the same cores included), then produce over
   PLAINTEXT too; the broker's CPU-seconds per GB over each run. With --client franz or both,
   bench/go/tlsperf (franz-go, tlsperf.py) does the same produce over SASL_SSL and the two
   fetches (from offset 0, no group) on a topic of its own: its client costs far less CPU per
   GB, so on the shared cores more of the brokers' own difference shows. Then end-to-end
   latency over SASL_SSL at one fixed rate (--latency-rate) both should sustain.
2. ACLs: the same listeners with the StandardAuthorizer on (super user: ANONYMOUS, the PLAINTEXT
   listener's principal, which Kafka's controller and inter-broker traffic also use) and the
   client's user granted only what the perf tools need. Produce + fetch over SASL_SSL; then
   --acls unrelated ACLs (literal and prefixed topic patterns of other users) are created and,
   once DescribeAcls lists them, produce + fetch again on a fresh topic; then they are removed and
   the baseline runs again. The change in %: loaded against the mean of the two baselines.
Each server first gets an unmeasured produce + fetch of --records over SASL_SSL (JIT and TLS
warm-up: otherwise Kafka's first measured run carries its JVM's warm-up and the later ones do not).

Medians over rounds go to a table on stdout and bench/results/<UTC>-tls.json (every raw run, the
machine and its load). Invariants: every child process has a timeout; a server is stopped
(process group SIGTERM, then SIGKILL) and its data dir removed before the next one starts.
"""

import argparse
import json
import os
import resource
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import driver
import latency_curve
import report
import tlsperf
from procs import GB, HOST, ROOT, CpuMeter, Server, cpu_figures, free_port
from workloads import TOPIC_COMMAND, Workload, consume, create_topic, java, produce, reason

BENCH_DIR = Path(__file__).resolve().parent
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
USER, PASSWORD = "bench", "bench-secret"
CERT_PASSWORD = "brook-secret"
CIPHER = "TLS_AES_128_GCM_SHA256"
TOPIC_PREFIX, GROUP_PREFIX = "bench-", "perf-consumer-"  # the perf consumer's default group id
PORTS_BELOW = 32768  # servers listen under the kernel's ephemeral range (clients' own ports)
SIZE = 1024


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def broker_settings(certs: Path) -> Dict[str, str]:
    """The SASL_SSL listener's keys, the same for Brook and Kafka (listeners come from add_listeners).

    ssl.cipher.suites pins the server side too, for the Go client, which cannot restrict its TLS 1.3
    offer: it offers AES-128-GCM first (AES hardware), which rustls takes (it follows the client's
    order) but JSSE, choosing by its own order, answers with AES-256-GCM. Both brokers then
    offer only CIPHER (Brook honours ssl.cipher.suites since 2026-12-06; before, it accepted the
    key without acting on it); tlsperf fails a connection whose suite is not CIPHER, so every
    figure is known to use it."""
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "ssl.cipher.suites": CIPHER,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
    }


AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def client_config(path: Path, certs: Path) -> Path:
    """The perf tools' --command-config: SCRAM-SHA-512 over TLS 1.3 with one cipher suite."""
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM_LOGIN} required username="{USER}" password="{PASSWORD}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.protocol": "TLSv1.3",
        "ssl.enabled.protocols": "TLSv1.3",
        "ssl.cipher.suites": CIPHER,
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def add_scram_user(bootstrap: str, deadline_s: float = 60) -> Optional[str]:
    """kafka-configs --alter over PLAINTEXT, then --describe until the credential shows (Kafka
    applies it from its metadata log a moment later); None on success, else the reason."""
    code, out = java(CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
                     "--entity-name", USER, "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={PASSWORD}]",
                     timeout_s=90)  # fmt: skip
    if code != 0:
        return f"kafka-configs --alter exited {code}: {reason(out)}"
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        code, out = java(CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users",
                         "--entity-name", USER, timeout_s=90)  # fmt: skip
        if code == 0 and "SCRAM-SHA-512" in out:
            return None
        time.sleep(0.5)
    return f"SCRAM user not listed after {deadline_s} s: {reason(out)}"


def negotiated(port: int, certs: Path) -> Optional[List]:
    """What the SASL_SSL port negotiates with an unpinned TLS 1.3 client (Python's ssl): the
    server's own choice, recorded beside the pinned figures."""
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    try:
        with socket.create_connection((HOST, port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=HOST) as s:
                return list(s.cipher() or [])
    except OSError as e:
        return [f"probe failed: {e}"]


def authorizer_enforced(server: Server, tls: str, config: Path) -> bool:
    """Whether ACLs are in force for the bench user: it lists its own (warm-up) topic over
    SASL_SSL but not one created beside it that it has no ACL for (Metadata hides topics a
    principal may not DESCRIBE), so a broker that ignored the authorizer cannot pass as loaded."""
    hidden = "acl-check-hidden"
    if create_topic(server.bootstrap, hidden, 1) is not None:
        return False
    code, out = java(TOPIC_COMMAND, "--bootstrap-server", tls, "--command-config", str(config), "--list", timeout_s=90)
    names = set(out.split())
    return code == 0 and f"{TOPIC_PREFIX}warm" in names and hidden not in names


def pinned_cipher(port: int, certs: Path) -> str:
    """What `openssl s_client` offering only TLS 1.3 + CIPHER gets from the port: the same
    offer as the pinned Java clients, shown so the table's figures are known to use it."""
    try:
        proc = subprocess.run(["openssl", "s_client", "-connect", f"{HOST}:{port}", "-tls1_3", "-ciphersuites", CIPHER,
                               "-CAfile", str(certs / "ca.pem")], capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"probe failed: {e}"
    line = next((ln.strip() for ln in proc.stdout.splitlines() if ", Cipher is " in ln), None)
    return line or f"no cipher negotiated: {(proc.stdout + proc.stderr)[-200:]}"


def children_cpu_s() -> float:
    """User + system CPU-s of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Run:
    """One server's figures: each perf-tool run under a name, plus the errors met."""

    def __init__(self, kind: str, mode: str, round_no: int, records: int):
        self.kind, self.records = kind, records
        self.doc: Dict = {"server": kind, "mode": mode, "round": round_no, "runs": {}, "errors": [],
                          "loadavg_before": list(os.getloadavg())}  # fmt: skip
        self.timeout_s = 60 + records / 2000  # > 2,000 records/s or the run is a failure anyway

    def measure(self, server: Server, name: str, step: Callable[[], tuple], records: int) -> Optional[Dict]:
        """Run one client (`step` returns (figures, output)), with the broker's CPU-s over it, and
        the client's: the CPU of the children waited for meanwhile, i.e. the client process."""
        cpu0, client0 = server.cpu_s(), children_cpu_s()
        figures, out = step()
        if figures is not None:
            gb = records * SIZE / GB
            figures.update(cpu_figures(cpu0, server.cpu_s(), gb))
            client = children_cpu_s() - client0
            figures.update({"client_cpu_s": client, "client_cpu_s_per_gb": client / gb})
        else:
            self.doc["errors"].append(f"{name}: {reason(out)}")
        self.doc["runs"][name] = figures
        key = "fetch_mb_per_s" if "fetch_mb_per_s" in (figures or {}) else "mb_per_s"
        log(f"{self.kind} {name}: " + ("failed" if figures is None else
            f"{figures[key]:.1f} MB/s, {figures.get('cpu_s_per_gb', float('nan')):.2f} CPU-s/GB"))  # fmt: skip
        return figures

    def produce(self, server: Server, name: str, topic: str, bootstrap: str, config: Optional[Path],
                acks: str, records: Optional[int] = None, client: str = "perf") -> Optional[Dict]:  # fmt: skip
        """Create `topic` and produce to it with kafka-producer-perf-test, or `client` "franz"
        (bench/go/tlsperf) with the same acks, record size and batching."""
        n = records or self.records
        err = create_topic(server.bootstrap, topic, server.partitions)  # over PLAINTEXT, as the super user
        if err:
            self.doc["errors"].append(f"{name}: {err}")
            return None
        cfg = str(config) if config else None
        if client == "franz":
            return self.franz(server, name, "produce", bootstrap, topic, n, cfg, acks)
        w = Workload(SIZE, acks, "none")
        return self.measure(server, name, lambda: produce(bootstrap, w, n, self.timeout_s, topic=topic,
                                                          config=cfg), n)  # fmt: skip

    def franz(self, server: Server, name: str, mode: str, bootstrap: str, topic: str, n: int,
              config: Optional[str], acks: str = "1") -> Optional[Dict]:  # fmt: skip
        """One tlsperf run, measured as the perf tools' are; the TLS suites its connections
        negotiated are kept per run and, once per server, in `negotiated_franz`."""
        figures = self.measure(server, name, lambda: tlsperf.run(mode, bootstrap, topic, n, self.timeout_s,
                                                                 config, acks, SIZE), n)  # fmt: skip
        if figures and figures.get("tls_cipher_suites"):
            seen = self.doc.setdefault("negotiated_franz", {})
            for key in ("tls_versions", "tls_cipher_suites", "tls_key_exchange"):
                seen.setdefault(key, [])
                seen[key] = sorted(set(seen[key]) | set(figures[key]))
        return figures

    def latency(self, server: Server, tls: str, config: Path, args: argparse.Namespace) -> None:
        """End-to-end and ack latency over SASL_SSL at one fixed rate (BenchDriver e2e: scheduled
        send times, no coordinated omission); `sustained` as in make bench's latency curve."""
        topic = f"{TOPIC_PREFIX}latency"
        err = create_topic(server.bootstrap, topic, server.partitions)
        figures, out = (None, err) if err else driver.e2e_point(
            tls, topic, args.latency_rate, args.latency_warmup, args.latency_duration, args.acks, SIZE, str(config))
        if figures is None:
            self.doc["errors"].append(f"latency: {reason(out or '')}")
        else:
            figures["target_msg_per_s"] = args.latency_rate
            received = figures.get("receive_rate_msg_per_s")
            figures["achieved_msg_per_s"] = None if received is None else min(args.latency_rate, received)
            why = latency_curve.verdict(figures)
            figures["sustained"] = why is None
            if why:
                figures["not_sustained"] = why
            log(f"{self.kind} latency at {args.latency_rate:,.0f} msg/s: p50 {fmt(figures['e2e_p50_ms'])} ms, "
                f"p99 {fmt(figures['e2e_p99_ms'])} ms, ack p99 {fmt(figures['ack_p99_ms'])} ms"
                + ("" if why is None else f", NOT sustained: {why}"))
        self.doc["latency"] = figures

    def produce_fetch(self, server: Server, label: str, topic: str, bootstrap: str, config: Path, acks: str) -> None:
        if self.produce(server, f"{label} produce", topic, bootstrap, config, acks):
            self.fetch(server, f"{label} fetch", topic, bootstrap, config)

    def fetch(self, server: Server, name: str, topic: str, bootstrap: str, config: Optional[Path],
              records: Optional[int] = None, client: str = "perf") -> Optional[Dict]:  # fmt: skip
        """Read `records` of `topic` with kafka-consumer-perf-test (in a group), or `client`
        "franz" (bench/go/tlsperf: from offset 0 of every partition, no group)."""
        n = records or self.records
        cfg = str(config) if config else None
        if client == "franz":
            return self.franz(server, name, "fetch", bootstrap, topic, n, cfg)
        return self.measure(server, name, lambda: consume(bootstrap, topic, n, self.timeout_s, config=cfg), n)


def run_server(kind: str, mode: str, round_no: int, args: argparse.Namespace, certs: Path, config: Path) -> Dict:
    """One fresh server in `mode` ("tls" or "acl"): its set-up, warm-up and measured runs."""
    data_dir = args.data_dir / f"{kind}-{mode}-r{round_no}"
    shutil.rmtree(data_dir, ignore_errors=True)
    settings = broker_settings(certs) | (AUTHORIZER if mode == "acl" else {})
    server = Server(kind, data_dir, brook_bin=args.brook_bin, partitions=args.partitions, settings=settings,
                    port_below=PORTS_BELOW)  # fmt: skip
    sasl_port = free_port(below=PORTS_BELOW)
    while sasl_port in (server.port, server.port + 1, server.metrics_port):
        sasl_port = free_port(below=PORTS_BELOW)
    server.add_listeners({"SASL_SSL": ("SASL_SSL", sasl_port)})
    tls, plain = f"{HOST}:{sasl_port}", server.bootstrap
    run = Run(kind, mode, round_no, args.records)
    cpu = CpuMeter()
    try:
        server.start()
        err = add_scram_user(plain)
        if err:
            raise RuntimeError(err)
        if mode == "acl":
            figures, out = driver.acls(plain, "grant", f"User:{USER}", TOPIC_PREFIX, GROUP_PREFIX)
            if figures is None:
                raise RuntimeError(f"granting the bench user's ACLs failed: {reason(out)}")
        run.doc["negotiated_unpinned"] = negotiated(sasl_port, certs)
        run.doc["negotiated_pinned"] = pinned_cipher(sasl_port, certs)
        log(f"{kind} SASL_SSL: pinned offer -> {run.doc['negotiated_pinned']}; "
            f"unpinned -> {' '.join(map(str, run.doc['negotiated_unpinned'] or []))}")
        warm = args.warmup_records
        if run.produce(server, "warm-up produce", f"{TOPIC_PREFIX}warm", tls, config, args.acks, warm) is None:
            raise RuntimeError("the SASL_SSL warm-up failed: " + run.doc["errors"][-1])
        run.fetch(server, "warm-up fetch", f"{TOPIC_PREFIX}warm", tls, config, warm)
        if mode == "tls":
            if "perf" in args.client:
                if run.produce(server, "tls produce", f"{TOPIC_PREFIX}tls", tls, config, args.acks):
                    run.fetch(server, "plaintext fetch", f"{TOPIC_PREFIX}tls", plain, None)
                    run.fetch(server, "tls fetch", f"{TOPIC_PREFIX}tls", tls, config)
                run.produce(server, "plaintext produce", f"{TOPIC_PREFIX}plain", plain, None, args.acks)
            if "franz" in args.client:  # the same runs with the Go client, on a topic of its own
                topic = f"{TOPIC_PREFIX}franz"
                if run.produce(server, "franz tls produce", topic, tls, config, args.acks, client="franz"):
                    run.fetch(server, "franz plaintext fetch", topic, plain, None, client="franz")
                    run.fetch(server, "franz tls fetch", topic, tls, config, client="franz")
                log(f"{kind} SASL_SSL with franz-go: {run.doc.get('negotiated_franz')}")
            if args.latency_rate > 0:
                run.latency(server, tls, config, args)
        else:
            run.doc["authorizer_enforced"] = authorizer_enforced(server, tls, config)
            if not run.doc["authorizer_enforced"]:
                run.doc["errors"].append("the authorizer let the bench user see a topic it has no ACL for")
            run.produce_fetch(server, "needed acls only", f"{TOPIC_PREFIX}acl-base", tls, config, args.acks)
            figures, out = driver.acls(plain, "unrelated", str(args.acls), "unrelated", timeout_s=300 + args.acls / 10)
            if figures is None:
                raise RuntimeError(f"creating {args.acls} ACLs failed: {reason(out)}")
            run.doc["acl_load"] = figures
            log(f"{kind}: {args.acls} ACLs created in {figures['create_s']:.1f} s, all listed after "
                f"{figures['listed_s']:.1f} s ({figures['listed_total']} ACLs in all)")
            run.produce_fetch(server, f"+{args.acls} acls", f"{TOPIC_PREFIX}acl-loaded", tls, config, args.acks)
            # The baseline once more with the unrelated ACLs gone: the loaded runs are compared with
            # the mean of a baseline before and after them, so running later (warmer JIT, fuller
            # page cache, more segments) favours neither side.
            figures, out = driver.acls(plain, "remove", "unrelated", timeout_s=300)
            if figures is None:
                raise RuntimeError(f"removing the unrelated ACLs failed: {reason(out)}")
            run.doc["acl_remove"] = figures
            run.produce_fetch(server, "needed acls only again", f"{TOPIC_PREFIX}acl-base-again", tls, config, args.acks)
    except RuntimeError as e:
        run.doc["errors"].append(str(e))
        log(f"{kind} {mode} round {round_no}: {e}")
    finally:
        server.stop()
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    run.doc["other_load_cores"] = cpu.other_cores()
    return run.doc


def median(runs: List[Dict], kind: str, mode: str, name: str, key: str) -> Optional[float]:
    values = [r["runs"][name][key] for r in runs
              if r["server"] == kind and r["mode"] == mode and (r["runs"].get(name) or {}).get(key) is not None]
    return statistics.median(values) if values else None


def lat_median(runs: List[Dict], kind: str, key: str) -> Optional[float]:
    values = [r["latency"][key] for r in runs if r["server"] == kind and r["mode"] == "tls"
              and (r.get("latency") or {}).get(key) is not None]
    return statistics.median(values) if values else None


def lat_sustained(runs: List[Dict], kind: str) -> bool:
    """The broker sustained the latency rate in every round it ran (so a ratio means something)."""
    mine = [r.get("latency") for r in runs if r["server"] == kind and r["mode"] == "tls"]
    return bool(mine) and all(f is not None and f.get("sustained") for f in mine)


def acl_figures(run: Dict, acls: int, what: str, key: str) -> Optional[Tuple[float, float]]:
    """(baseline, loaded) of one ACL run: the baseline is the mean of the runs before and after."""
    base = [(run["runs"].get(f"needed acls only{again} {what}") or {}).get(key) for again in ("", " again")]
    base = [v for v in base if v is not None]
    loaded = (run["runs"].get(f"+{acls} acls {what}") or {}).get(key)
    return (statistics.mean(base), loaded) if base and loaded is not None else None


def acl_row(runs: List[Dict], kind: str, acls: int, what: str, key: str) -> Tuple[Optional[float], ...]:
    """Medians over rounds of the baseline, the loaded figure and the change in %. The change is
    the median of each round's own change: a round's three runs share one server and a few
    minutes, while the load of other work differs between rounds by more than the effect."""
    pairs = [f for r in runs if r["server"] == kind and r["mode"] == "acl"
             for f in [acl_figures(r, acls, what, key)] if f is not None and f[0]]  # fmt: skip
    if not pairs:
        return None, None, None
    return (statistics.median(b for b, _ in pairs), statistics.median(x for _, x in pairs),
            statistics.median((x / b - 1) * 100 for b, x in pairs))  # fmt: skip


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def fmt(v: Optional[float], spec: str = ".1f") -> str:
    return "n/a" if v is None else format(v, spec)


def verdict(v: Optional[float], ok: Callable[[float], bool]) -> str:
    return "n/a" if v is None else ("met" if ok(v) else "NOT met")


def table(doc: Dict) -> str:
    """The medians, the issue's ratios with their targets, the latency and the ACL table."""
    runs, acls = doc["runs"], doc["config"]["acls"]

    def m(kind: str, name: str, key: str) -> Optional[float]:
        return median(runs, kind, "tls", name, key)

    def brook_over_kafka(name: str, key: str) -> Optional[float]:
        return ratio(m("brook", name, key), m("kafka", name, key))

    head = f"{'Kafka':>9} {'Brook':>9} {'Brook/Kafka':>12}"
    lines = [doc["load"]["note"]]
    clients = doc["config"].get("clients", ["perf"])  # results from before --client: the perf tools only
    sections = {"perf": ("median over rounds, 1 KB records", "ratio (issue 25 target)", ""),
                "franz": ("franz-go client (bench/go/tlsperf), median", "ratio, franz-go client (issue 25 target)",
                          "franz ")}  # fmt: skip
    for client in clients:
        medians_head, ratios_head, run_prefix = sections[client]
        if client == "perf":
            rows = [
                ("TLS produce MB/s", "tls produce", "mb_per_s"),
                ("TLS fetch MB/s", "tls fetch", "fetch_mb_per_s"),
                ("TLS produce CPU-s/GB", "tls produce", "cpu_s_per_gb"),
                ("TLS fetch CPU-s/GB", "tls fetch", "cpu_s_per_gb"),
                ("plaintext produce MB/s", "plaintext produce", "mb_per_s"),
                ("plaintext fetch MB/s", "plaintext fetch", "fetch_mb_per_s"),
                ("plaintext fetch CPU-s/GB", "plaintext fetch", "cpu_s_per_gb"),
            ]
        else:  # no plaintext produce: the Go client's runs are the TLS ones plus the fetch baseline
            rows = [
                ("TLS produce MB/s", "franz tls produce", "mb_per_s"),
                ("TLS fetch MB/s", "franz tls fetch", "fetch_mb_per_s"),
                ("TLS produce CPU-s/GB", "franz tls produce", "cpu_s_per_gb"),
                ("TLS fetch CPU-s/GB", "franz tls fetch", "cpu_s_per_gb"),
                ("plaintext fetch MB/s", "franz plaintext fetch", "fetch_mb_per_s"),
                ("plaintext fetch CPU-s/GB", "franz plaintext fetch", "cpu_s_per_gb"),
            ]
        lines += ["", f"{medians_head:<44} {head}"]
        client_cpu = [(f"{label} client CPU-s/GB", name, "client_cpu_s_per_gb") for label, name in
                      (("TLS produce", rows[0][1]), ("TLS fetch", rows[1][1]))]  # fmt: skip
        for label, name, key in rows + [r for r in client_cpu if m("kafka", r[1], r[2]) or m("brook", r[1], r[2])]:
            k, b = m("kafka", name, key), m("brook", name, key)
            lines.append(f"{label:<44} {fmt(k):>9} {fmt(b):>9} {fmt(ratio(b, k), '.2f'):>12}")
        tls, plain = f"{run_prefix}tls fetch", f"{run_prefix}plaintext fetch"
        tls_over_plain = {s: ratio(m(s, tls, "fetch_mb_per_s"), m(s, plain, "fetch_mb_per_s"))
                          for s in ("kafka", "brook")}  # fmt: skip
        lines.append(f"{'TLS fetch / plaintext fetch':<44} {fmt(tls_over_plain['kafka'], '.2f'):>9} "
                     f"{fmt(tls_over_plain['brook'], '.2f'):>9}")
        produce = f"{run_prefix}tls produce"
        ratios = [
            ("Brook TLS fetch / Kafka TLS fetch", brook_over_kafka(tls, "fetch_mb_per_s"), ">= 2", 2.0),
            ("Brook / Kafka CPU-s per GB, TLS fetch", brook_over_kafka(tls, "cpu_s_per_gb"), "<= 0.5", -0.5),
            ("Brook / Kafka CPU-s per GB, TLS produce", brook_over_kafka(produce, "cpu_s_per_gb"), "-", None),
            ("Brook TLS produce / Kafka TLS produce", brook_over_kafka(produce, "mb_per_s"), ">= 1.5", 1.5),
            ("Brook TLS fetch / Brook plaintext fetch", tls_over_plain["brook"], ">= 0.6", 0.6),
        ]  # a positive goal is a floor, a negative one a ceiling
        lines += ["", f"{ratios_head:<44} {'value':>9} {'target':>9}  result"]
        for label, v, target, goal in ratios:
            met = "" if goal is None else verdict(v, lambda x: x >= goal if goal > 0 else x <= -goal)
            lines.append(f"{label:<44} {fmt(v, '.2f'):>9} {target:>9}  {met}")
    if any(r.get("latency") for r in runs if r["mode"] == "tls"):
        rate = doc["config"]["latency_rate"]
        lines += ["", f"{f'latency, SASL_SSL, {rate:,.0f} msg/s (median ms)':<44} {head}"]
        both = all(lat_sustained(runs, k) for k in ("kafka", "brook"))
        for label, key in (("end-to-end p50", "e2e_p50_ms"), ("end-to-end p99", "e2e_p99_ms"),
                           ("ack p99", "ack_p99_ms")):
            k, b = lat_median(runs, "kafka", key), lat_median(runs, "brook", key)
            lines.append(f"{label:<44} {fmt(k):>9} {fmt(b):>9} {fmt(ratio(b, k) if both else None, '.2f'):>12}")
        if not both:
            lines.append("(no ratio: a broker did not sustain the rate in every round or has no figures; see the json)")
    lines += ["", f"{'ACLs (StandardAuthorizer on, SASL_SSL)':<44} {'needed only':>11} {f'+{acls:,}':>11} "
                  f"{'change':>8}  target > -5 % (MB/s)"]
    for kind in ("kafka", "brook"):
        for label, what, key in (("produce MB/s", "produce", "mb_per_s"), ("fetch MB/s", "fetch", "fetch_mb_per_s"),
                                 ("produce CPU-s/GB", "produce", "cpu_s_per_gb"),
                                 ("fetch CPU-s/GB", "fetch", "cpu_s_per_gb")):  # fmt: skip
            base, loaded, change = acl_row(runs, kind, acls, what, key)
            met = verdict(change, lambda v: v > -5) if key != "cpu_s_per_gb" else ""
            lines.append(f"{kind.capitalize() + ' ' + label:<44} {fmt(base, '.2f' if 'CPU' in label else '.1f'):>11} "
                         f"{fmt(loaded, '.2f' if 'CPU' in label else '.1f'):>11} "
                         f"{'n/a' if change is None else f'{change:+.1f} %':>8}  {met}")
    lines.append("(change: the median of each round's own change, loaded against the mean of the baseline "
                 "before and after it)")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round of 100,000 records")
    ap.add_argument("--rounds", type=int, help="rounds (default 3; 1 with --quick)")
    ap.add_argument("--records", type=int,
                    help="1 KB records per measured run (default 1,000,000; 100,000 with --quick)")
    ap.add_argument("--warmup-records", type=int,
                    help="records of the unmeasured warm-up produce + fetch on each server (default: --records; "
                         "at a fifth of 1,000,000, Kafka's first measured produce still cost it twice the "
                         "CPU-s per GB of its later ones)")
    ap.add_argument("--acls", type=int, default=10_000, help="unrelated ACLs loaded for the ACL runs (default 10,000)")
    ap.add_argument("--acks", default="1", help="the producer's acks (default 1)")
    ap.add_argument("--latency-rate", type=float, default=1000.0,
                    help="msg/s of the SASL_SSL end-to-end latency run, one both brokers should sustain "
                         "(default 1,000, i.e. ~1 MB/s; 0 skips it)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions per topic (default 3)")
    ap.add_argument("--servers", default="kafka,brook", help="comma-separated subset of kafka,brook")
    ap.add_argument("--client", choices=("perf", "franz", "both"), default="both",
                    help="the TLS runs' client: Kafka's perf tools, the franz-go bench/go/tlsperf, or both "
                         "(default; the warm-up, latency and ACL runs use the JVM clients either way)")
    ap.add_argument("--modes", default="tls,acl", help="comma-separated subset of tls,acl")
    ap.add_argument("--brook-bin", type=Path,
                    default=Path(os.environ.get("BROOK_BIN", ROOT / "target" / "release" / "brook")))
    ap.add_argument("--data-dir", type=Path, default=BENCH_DIR / ".data-tls")
    ap.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--keep-data", action="store_true", help="keep each server's data dir (and log)")
    ap.add_argument("--report", type=Path, help="only print the table of a saved results json")
    args = ap.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.records = args.records or (100_000 if args.quick else 1_000_000)
    args.warmup_records = args.warmup_records or args.records
    args.latency_warmup, args.latency_duration = (2.0, 5.0) if args.quick else (5.0, 20.0)
    args.servers = [s for s in args.servers.split(",") if s]
    args.modes = [s for s in args.modes.split(",") if s]
    args.client = ["perf", "franz"] if args.client == "both" else [args.client]
    wrong = set(args.servers) - {"kafka", "brook"} or set(args.modes) - {"tls", "acl"}
    if wrong or args.rounds < 1 or args.records < 1:
        ap.error("--servers takes kafka,brook, --modes tls,acl; --rounds and --records must be positive")
    return args


def main() -> int:
    args = parse_args()
    if args.report:
        print(table(json.loads(args.report.read_text())))
        return 0
    if "brook" in args.servers and not args.brook_bin.is_file():
        print(f"brook binary not found at {args.brook_bin}", file=sys.stderr)
        return 1
    driver.ensure_built()
    if "franz" in args.client:
        tlsperf.ensure_built()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    certs = args.data_dir / "certs"
    subprocess.run(["bash", str(ROOT / "scripts" / "certs.sh"), str(certs), CERT_PASSWORD], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    config = client_config(args.data_dir / "client-sasl-ssl.properties", certs)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    load_before = os.getloadavg()
    runs: List[Dict] = []
    for round_no in range(1, args.rounds + 1):
        for mode in args.modes:
            for kind in args.servers:
                log(f"round {round_no}/{args.rounds}: {kind} {mode} (load average {os.getloadavg()[0]:.2f})")
                runs.append(run_server(kind, mode, round_no, args, certs, config))
    doc = {
        "started_utc": stamp,
        "machine": report.machine(),
        "config": {
            "rounds": args.rounds, "records": args.records, "warmup_records": args.warmup_records,
            "record_size": SIZE, "acls": args.acls, "acks": args.acks, "partitions": args.partitions,
            "latency_rate": args.latency_rate, "latency_warmup_s": args.latency_warmup,
            "latency_duration_s": args.latency_duration, "servers": args.servers, "modes": args.modes,
            "clients": args.client,
            "client_tls": {"protocol": "TLSv1.3", "cipher": CIPHER}, "sasl": "SCRAM-SHA-512",
            "brook_bin": str(args.brook_bin),
        },
        "load": report.load_note(load_before, os.getloadavg(), runs),
        "runs": runs,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-tls.json"
    out.write_text(json.dumps(doc, indent=2))
    print(table(doc))
    errors = [f"{r['server']} {r['mode']} round {r['round']}: {e}" for r in runs for e in r["errors"]]
    if errors:
        print("\nfailures (details in the json):\n" + "\n".join(errors))
    print(f"\nraw figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
