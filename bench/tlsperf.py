"""The benchmark's Go client (bench/go/tlsperf, franz-go): build it, run it, parse it.

`make bench-tls`'s second client beside Kafka's JVM perf tools: a produce and a fetch run whose
client costs far less CPU per GB, so on the 2 cores it shares with the broker more of the
brokers' own difference shows (bench/README.md, "TLS and ACLs"). It is built with `go build`
from its own go.mod (the franz-go versions of integration-tests/drivers/franz) into
bench/.build/tlsperf, only when the binary is older than a source file: nothing is fetched once
the module cache holds those versions.

Invariants: every run has a wall-clock timeout (the program's own -timeout, and the process is
killed a little after it); a failed run yields None and the program's output.
"""

import json
import subprocess
from pathlib import Path
from typing import Dict, Optional, Tuple

from procs import go_build

BENCH_DIR = Path(__file__).resolve().parent
SOURCE_DIR = BENCH_DIR / "go" / "tlsperf"
BINARY = BENCH_DIR / ".build" / "tlsperf"


def ensure_built() -> None:
    """go build into bench/.build unless the binary is newer than main.go, go.mod and go.sum."""
    go_build(SOURCE_DIR, BINARY)


def run(mode: str, bootstrap: str, topic: str, records: int, timeout_s: float, config: Optional[str] = None,
        acks: str = "1", size: int = 1024) -> Tuple[Optional[Dict], str]:  # fmt: skip
    """One `tlsperf produce|fetch` run; (figures, raw output). Fetch figures carry the MB/s under
    fetch_mb_per_s as well, the key the perf consumer's figure has in tls.py's table."""
    argv = [str(BINARY), mode, "-bootstrap", bootstrap, "-topic", topic, "-records", str(records),
            "-timeout", f"{timeout_s:.0f}s"]  # fmt: skip
    if mode == "produce":
        argv += ["-acks", acks, "-size", str(size)]
    if config:
        argv += ["-config", config]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s + 30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"tlsperf {mode} timed out after {timeout_s + 30:.0f} s"
    out = proc.stdout + proc.stderr
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        return None, f"tlsperf {mode} exited {proc.returncode}: {out[-500:]}"
    figures = json.loads(line)
    if figures.get("records") != records:
        return None, f"tlsperf {mode}: {figures.get('records')} records, not {records}: {line}"
    if mode == "fetch":
        figures["fetch_mb_per_s"] = figures["mb_per_s"]
    return figures, out
