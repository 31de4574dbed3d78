"""The command line shared by the Python drivers (confluent, kafka-python, kcat).

Parses `<command> --bootstrap B [options]` exactly as integration-tests/README.md specifies,
reads `--input` JSON lines, prints results, and maps failures to exit codes: 0 ok, 1 client
error (message on stderr), 3 unsupported (prints {"unsupported": why}). Drivers do no
checking of their own; this module only moves data between the client and JSON.
"""

import argparse
import json
import signal
import sys
import threading
import time
import traceback
from typing import Callable, Dict, List, Optional

EXIT_ERROR = 1
EXIT_UNSUPPORTED = 3
COMMANDS = (
    "metadata",
    "create-topic",
    "delete-topic",
    "create-partitions",
    "describe-topic",
    "list-topics",
    "describe-configs",
    "alter-configs",
    "produce",
    "consume",
    "group-consume",
    "offsets",
    "txn-produce",
    "txn-copy",
)


class UnsupportedCommand(Exception):
    """Raised by a driver for a command or option its client cannot express."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Brook driver protocol (integration-tests/README.md)")
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--client-config", help="a properties file of client settings (harness/client_config.py)")
    p.add_argument("--topic")
    p.add_argument("--partitions", help="create-topic: a count; consume: a comma list")
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--config", action="append", default=[], help="k=v, repeatable")
    p.add_argument("--total", type=int)
    p.add_argument("--broker", type=int)
    p.add_argument("--set", action="append", default=[], help="k=v, repeatable")
    p.add_argument("--delete", action="append", default=[], help="k, repeatable")
    p.add_argument("--input")
    p.add_argument("--codec", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"))
    p.add_argument("--acks", default="all", choices=("all", "1", "0", "-1"))
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--max-request-size", type=int)
    p.add_argument("--count", type=int)
    p.add_argument("--from", dest="from_", default="earliest")
    p.add_argument("--timeout-ms", type=int, default=20000)
    p.add_argument("--max-bytes", type=int)
    p.add_argument("--spec")
    p.add_argument("--isolation", choices=("read_committed", "read_uncommitted"),
                   help="consume: isolation.level (default: the client's own)")
    # txn-produce (README.md's driver protocol)
    p.add_argument("--transactional-id")
    p.add_argument("--abort", help="txn-produce: comma list of the transactions to abort")
    # txn-copy (README.md's driver protocol)
    p.add_argument("--output-topic")
    p.add_argument("--abort-every", type=int, default=0,
                   help="txn-copy: abort transactions 1, 1+N, 1+2N, ... (0: none)")
    # group-consume (README.md's driver protocol)
    p.add_argument("--group")
    p.add_argument("--assignor", default="range", choices=("range", "cooperative-sticky"))
    p.add_argument("--instance-id")
    p.add_argument("--idle-ms", type=int, default=0)
    p.add_argument("--session-timeout-ms", type=int, default=30000)
    p.add_argument("--commit-delay-ms", type=int, default=0,
                   help="wait this long between printing a poll's records and committing them")
    p.add_argument("--events", action="store_true",
                   help="also print assignment changes and failed commits as {\"event\": ..} lines")
    return p


def stop_on_sigterm() -> threading.Event:
    """An event set by SIGTERM/SIGINT: group-consume then stops like at its timeout and closes
    gracefully (LeaveGroup), whereas SIGKILL leaves the group to the session timeout."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


# A group member may be told to leave while the interpreter is still starting, the client
# library still importing or its consumer still connecting (the soak stops members a few seconds
# after starting them, on a loaded machine). The handler is therefore installed as this module is
# imported, which the drivers do before importing their client library, and SIGTERM, which
# harness/members.py starts them with blocked, is unblocked only then: a stop that early is
# delivered to the handler, and the loop ends at once and closes gracefully.
GROUP_STOP = stop_on_sigterm() if sys.argv[1:2] == ["group-consume"] else None
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def emit_now(doc) -> None:
    """One JSON line, flushed at once: a member killed right after printing a record still
    reports it (its offset is committed only after it is printed)."""
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def key_values(items: List[str]) -> Dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected k=v, got {item!r}")
        out[key] = value
    return out


def partition_list(text: Optional[str]) -> Optional[List[int]]:
    if text is None or text == "":
        return None
    return [int(p) for p in text.split(",")]


def read_records(path: Optional[str]) -> List[dict]:
    if path is None:
        raise ValueError("produce needs --input")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def encode(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else text.encode("utf-8")


def decode(data) -> Optional[str]:
    if data is None:
        return None
    if isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", errors="replace")


def emit(doc) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")


def emit_lines(docs) -> None:
    for doc in docs:
        sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def main(handlers: Dict[str, Callable[[argparse.Namespace], None]]) -> None:
    """Parse argv, run the command's handler, exit with the protocol's code."""
    args = parser().parse_args()
    handler = handlers.get(args.command)
    try:
        if handler is None:
            raise UnsupportedCommand(f"command {args.command} is not supported by this client")
        handler(args)
    except UnsupportedCommand as e:
        emit({"unsupported": str(e)})
        sys.stdout.flush()
        sys.exit(EXIT_UNSUPPORTED)
    except Exception as e:  # any client error: report it and fail, the tests read stderr
        traceback.print_exc(file=sys.stderr)
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.stdout.flush()
        sys.exit(EXIT_ERROR)
    sys.stdout.flush()


def group_loop(args, poll, commit) -> None:
    """The group-consume loop shared by the Python drivers (README.md's protocol).

    `poll(timeout_s, max_records)` returns [(partition, offset, key, value)] from the client;
    `commit({partition: next_offset})` commits synchronously. Each record is printed before
    its offset is committed (so a killed member causes re-delivery, never loss). A failed
    commit (the group rebalanced meanwhile) is reported on stderr and the run goes on: the
    records come again to their next owner, where a scenario sees them as duplicates.
    Stops after --count records, after --idle-ms without records once one arrived, at
    --timeout-ms, or on SIGTERM/SIGINT.
    """
    stop = GROUP_STOP if GROUP_STOP is not None else stop_on_sigterm()
    wanted = args.count if args.count is not None else sys.maxsize
    deadline = time.monotonic() + args.timeout_ms / 1000
    printed, last = 0, 0.0
    while printed < wanted and time.monotonic() < deadline and not stop.is_set():
        if args.idle_ms and printed and time.monotonic() - last >= args.idle_ms / 1000:
            break
        done = {}
        for partition, offset, key, value in poll(0.2, wanted - printed):
            emit_now({"partition": partition, "offset": offset, "key": decode(key), "value": decode(value)})
            done[partition] = offset + 1
            printed += 1
            last = time.monotonic()
        if done:
            if args.commit_delay_ms:
                time.sleep(args.commit_delay_ms / 1000)
            try:
                commit(done)
            except Exception as e:  # noqa: BLE001 - any commit failure means re-delivery
                print(f"commit failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                if args.events:
                    emit_now({"event": "commit-failed", "error": f"{type(e).__name__}: {e}"})
