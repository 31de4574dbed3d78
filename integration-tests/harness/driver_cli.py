"""The command line shared by the Python drivers (confluent, kafka-python, kcat).

Parses `<command> --bootstrap B [options]` exactly as integration-tests/README.md specifies,
reads `--input` JSON lines, prints results, and maps failures to exit codes: 0 ok, 1 client
error (message on stderr), 3 unsupported (prints {"unsupported": why}). Drivers do no
checking of their own; this module only moves data between the client and JSON.
"""

import argparse
import json
import sys
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
    "offsets",
)


class UnsupportedCommand(Exception):
    """Raised by a driver for a command or option its client cannot express."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Brook driver protocol (integration-tests/README.md)")
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("--bootstrap", required=True)
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
    return p


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
